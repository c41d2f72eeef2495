"""A generating model's cached loop against its own full forward in report.json
(`generation.full_prefix`): the lengths compared, each with the file's max logit difference
from the full forward over the same whole prefix and from the forward with cache, and the max
difference over them."""

from __future__ import annotations

from typing import TypedDict

from onnx_parity.generation_results import FullPrefix, PrefixLength
from onnx_parity.report.json_figures import figure_from_json, figure_to_json


class PrefixLengthJson(TypedDict):  # generation_results.PrefixLength
    total: int  # positions fed: the prefix and the step's token
    threshold: int | None  # the threshold whose steps it is; null: the generation's last step
    max_logit_diff: float | str  # the file against the full forward (no cache); "inf" as text
    cached_diff: float | str  # the file against the forward with cache
    cached_within: bool
    tokens_agree: int  # rows whose greedy token is the full forward's
    rows: int
    differing_rows: list[int]
    first_token: list[int] | None  # [prompt row, the file's token, the full forward's]
    recomputes: bool  # the model's own generation drops its cache crossing the threshold


class FullPrefixJson(TypedDict):  # generation_results.FullPrefix
    lengths: list[int]  # the total lengths compared
    max_logit_diff: float | str  # over them: the file against the full forward
    compared: list[PrefixLengthJson]
    built: str  # how a threshold's prefix of tokens was made ("" when none ran)


def full_prefix_to_json(full: FullPrefix) -> FullPrefixJson:
    return {"lengths": [item.total for item in full.lengths],
            "max_logit_diff": figure_to_json(full.max_logit_diff), "built": full.built,
            "compared": [_length_to_json(item) for item in full.lengths]}


def _length_to_json(item: PrefixLength) -> PrefixLengthJson:
    return {"total": item.total, "threshold": item.threshold,
            "max_logit_diff": figure_to_json(item.max_logit_diff),
            "cached_diff": figure_to_json(item.cached_diff),
            "cached_within": item.cached_within, "tokens_agree": item.tokens_agree,
            "rows": item.rows, "differing_rows": list(item.differing_rows),
            "first_token": list(item.first_token) if item.first_token else None,
            "recomputes": item.recomputes}


def full_prefix_from_json(data: FullPrefixJson | None) -> FullPrefix | None:
    if not data:
        return None
    return FullPrefix(tuple(_length_from_json(item) for item in data["compared"]), data["built"])


def _length_from_json(data: PrefixLengthJson) -> PrefixLength:
    token = data["first_token"]
    return PrefixLength(
        data["total"], data["threshold"], figure_from_json(data["max_logit_diff"]),
        figure_from_json(data["cached_diff"]),
        data["tokens_agree"], data["rows"], tuple(data["differing_rows"]),
        (token[0], token[1], token[2]) if token else None, data["recomputes"],
        data["cached_within"])
