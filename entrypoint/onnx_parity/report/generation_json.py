"""A generating model's record in report.json (`models[].generation`), written only for a model
checked with `generate` (older reports and other models have none)."""

from __future__ import annotations

from onnx_parity.generation_results import GenerationResult, TokenDifference
from onnx_parity.report.json_shapes import GenerationJson, TokenDifferenceJson
from onnx_parity.report.threshold_json import thresholds_from_json, thresholds_to_json


def generation_to_json(g: GenerationResult) -> GenerationJson:
    first = g.first_token_difference
    difference: TokenDifferenceJson | None = None if first is None else {
        "step": first.step, "row": first.row, "pytorch_token": first.pytorch_token,
        "onnx_token": first.onnx_token, "logit_diff": first.logit_diff,
        "margin": first.margin, "near_tie": first.near_tie}
    return {"steps": g.steps, "rows": g.rows, "tokens_agree": list(g.tokens_agree),
            "first_token_difference": difference, "max_logit_diff": list(g.max_logit_diff),
            "teacher_forced_from": g.teacher_forced_from,
            "thresholds": thresholds_to_json(g.thresholds)}


def generation_from_json(data: GenerationJson | None) -> GenerationResult | None:
    if not data:
        return None
    first = data["first_token_difference"]
    return GenerationResult(
        steps=data["steps"], rows=data["rows"], tokens_agree=tuple(data["tokens_agree"]),
        first_token_difference=None if first is None else TokenDifference(
            step=first["step"], row=first["row"], pytorch_token=first["pytorch_token"],
            onnx_token=first["onnx_token"], logit_diff=first["logit_diff"],
            margin=first["margin"], near_tie=first["near_tie"]),
        max_logit_diff=tuple(data["max_logit_diff"]),
        teacher_forced_from=data["teacher_forced_from"],
        thresholds=thresholds_from_json(data.get("thresholds", [])))
