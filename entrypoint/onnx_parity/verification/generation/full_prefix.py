"""The file's cached loop against the model's own full forward over the same whole prefix.

Both sides of the generation check feed their cache back, so a model whose cached loop is not
the function it defines passes the step-by-step comparison while every runtime that feeds
presents back (onnxruntime-genai, optimum) computes other values than transformers' `generate`.
Phi-3's LongRoPE is one: keys cached with the short factors stay so once the context passes
`original_max_position_embeddings`, where `generate` drops its cache and recomputes every
position with the long factors. So the file's presents-fed logits are also compared with
PyTorch's forward over the whole prefix with no cache, at the generation's last step and at the
three steps of every crossed threshold (total lengths T - 1, T and T + 1). A threshold's steps
run from a real prefix of tokens, since a built past of drawn keys (threshold_past.py) has no
tokens to run a full forward over: the prompts, continued by each row's own tokens over again
up to T - 2 positions (cut to their last T - 2 when longer), run through each cache in passes of
at most PREFILL positions. PyTorch runs first, its weights in memory; onnxruntime after, on the
generation check's session. thresholds.py judges (`position-threshold`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.generation_results import FullPrefix, PrefixLength
from onnx_parity.models import PositionLimits, one_run
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import (
    OnnxDecoder,
    TorchDecoder,
    position_ids,
    step_failure,
)
from onnx_parity.verification.generation.thresholds import past_lengths
from onnx_parity.verification.generation.torch_steps import RecordedChunk
from onnx_parity.verification.runtime import Session

# Positions per pass through a cache: one prompt pass of a 4,094-position prefix would return
# (rows, 4094, vocab) logits, 2 GB for a 32,000-token vocabulary and 4 rows.
PREFILL = 512
BUILT = ("a threshold's prefix: the first batch of prompts continued by each row's own tokens "
         "over again to T - 2 positions (their last T - 2 when longer), then one token a step, "
         "the full forward's greedy token")


@dataclass(frozen=True)
class Expected:
    """PyTorch at one total length: its full forward's and its cached loop's last-position
    logits, (rows, vocab), and whether its own generation drops its cache crossing there."""

    total: int
    threshold: int | None  # the threshold whose steps it is; None: the generation's last step
    first_row: int  # the prompt row of the first row
    live: np.ndarray  # rows compared (not stopped at the end-of-sequence token)
    full: np.ndarray
    cached: np.ndarray
    recomputes: bool = False


@dataclass(frozen=True)
class ThresholdPrefix:
    """A threshold's prefix and the token each step feeds after it: what the file is fed."""

    ids: np.ndarray
    mask: np.ndarray
    tokens: tuple[np.ndarray, ...]  # (rows, 1) per step


@dataclass(frozen=True)
class TorchPrefix:
    """PyTorch's side, kept while its weights leave memory: per decoding chunk its last step,
    and per crossed threshold its prefix with the three steps."""

    last: tuple[Expected, ...]
    thresholds: tuple[tuple[ThresholdPrefix, tuple[Expected, ...]], ...]


def torch_full_prefix(decoders: Decoders, chunks: list[RecordedChunk],
                      constants: dict[str, Any], limits: PositionLimits) -> TorchPrefix | None:
    """PyTorch's full forwards (and cached loops) of a decoder-only model; None for an
    encoder-decoder's or a vision-language model's decoder (not compared this way yet)."""
    if decoders.encoder is not None or decoders.pipeline is not None:
        return None
    last = tuple(_last_step(decoders, constants, chunk) for chunk in chunks if chunk.decoding)
    first = chunks[0].steps[0]  # the first batch's prompt pass
    values = sorted({threshold.value for threshold in limits.thresholds
                     if limits.crossed(threshold)})
    return TorchPrefix(last, tuple(_threshold(decoders, constants, (first.ids, first.mask), value)
                                   for value in values))


def _last_step(decoders: Decoders, constants: dict[str, Any],
               chunk: RecordedChunk) -> Expected:
    """The chunk's last step: the prompts and every token fed since, as one prefix."""
    last = chunk.steps[-1]
    ids = np.concatenate([step.ids for step in chunk.steps], axis=1)
    full = full_forward(decoders, constants, ids, last.mask)
    return Expected(int(last.mask.shape[1]), None, chunk.first_row, last.live, full,
                    last.expected.logits[:, -1])


def full_forward(decoders: Decoders, constants: dict[str, Any], ids: np.ndarray,
                 mask: np.ndarray) -> np.ndarray:
    """The model over the whole prefix with no cache: its last position's logits."""
    if decoders.flat:  # its forward takes a past: an empty one
        return TorchDecoder(decoders.module, decoders.shape, True, constants,
                            decoders.dtype).step(ids, mask).logits[:, -1]
    import torch

    given = ({"position_ids": torch.from_numpy(position_ids(mask, ids.shape[1]))}
             if decoders.shape.positions else {})
    try:
        with torch.no_grad(), one_run(decoders.module):
            out = decoders.module(input_ids=torch.from_numpy(ids),
                                  attention_mask=torch.from_numpy(mask), **given,
                                  **{**constants, **_last_only(decoders.module),
                                     "use_cache": False})
    except Exception as error:  # whatever forward raises is the model's failure
        raise step_failure(error, "the full forward over the whole prefix", ids, mask) from error
    logits = out.logits if hasattr(out, "logits") else out[0]
    return np.asarray(logits[:, -1].detach().float().numpy())


def _last_only(module: Any) -> dict[str, Any]:
    """transformers' `logits_to_keep = 1` where forward takes it: the last position's logits
    only, not (rows, prefix, vocab)."""
    forward = getattr(module, "forward", None)
    takes = forward is not None and "logits_to_keep" in inspect.signature(forward).parameters
    return {"logits_to_keep": 1} if takes else {}


def _threshold(decoders: Decoders, constants: dict[str, Any],
               prompt: tuple[np.ndarray, np.ndarray],
               value: int) -> tuple[ThresholdPrefix, tuple[Expected, ...]]:
    """PyTorch's cached loop from the prefix across `value`, each step's whole prefix also run
    with no cache; the full forward's greedy token is the next step's."""
    lengths = past_lengths(value)
    ids, mask = prefix_tokens(prompt, lengths[0])
    cached = TorchDecoder(decoders.module, decoders.shape, decoders.flat,
                          {**constants, **_last_only(decoders.module)}, decoders.dtype)
    token = prefill(cached, ids, mask).argmax(-1)[:, None].astype(np.int64)
    whole, steps, tokens = ids, [], []
    for past in lengths:
        mask = np.concatenate([mask, np.ones((len(ids), 1), dtype=np.int64)], axis=1)
        whole = np.concatenate([whole, token], axis=1)
        recomputes = past == value and _recomputes(decoders, cached, whole, mask)
        logits = cached.step(token, mask).logits[:, -1]
        full = full_forward(decoders, constants, whole, mask)
        steps.append(Expected(past + 1, value, 0, np.ones(len(ids), dtype=bool), full, logits,
                              recomputes))
        tokens.append(token)
        token = full.argmax(-1)[:, None].astype(np.int64)
    first_mask = mask[:, :ids.shape[1]]
    return ThresholdPrefix(ids, first_mask, tuple(tokens)), tuple(steps)


def prefix_tokens(prompt: tuple[np.ndarray, np.ndarray],
                  length: int) -> tuple[np.ndarray, np.ndarray]:
    """The prompt rows as `length` positions: their last `length` columns, or continued by
    each row's own (unpadded) tokens over again, the mask by ones."""
    ids, mask = prompt
    if length <= ids.shape[1]:
        return ids[:, -length:], mask[:, -length:]
    extra = length - ids.shape[1]
    more = np.stack([np.resize(row[kept > 0] if kept.any() else row, extra)
                     for row, kept in zip(ids, mask, strict=True)])
    return (np.concatenate([ids, more.astype(np.int64)], axis=1),
            np.concatenate([mask, np.ones((len(ids), extra), dtype=np.int64)], axis=1))


def prefill(side: TorchDecoder | OnnxDecoder, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The prefix through a side's cache in passes of at most PREFILL positions (each feeding
    the presents of the one before); the last position's logits."""
    start, logits = 0, np.zeros(0)
    for end in [*range(PREFILL, ids.shape[1], PREFILL), ids.shape[1]]:
        logits = side.step(ids[:, start:end], mask[:, :end]).logits[:, -1]
        start = end
    return logits


def _recomputes(decoders: Decoders, cached: TorchDecoder, whole: np.ndarray,
                mask: np.ndarray) -> bool:
    """Whether the model's own generation drops its cache at this step (Phi3's
    `prepare_inputs_for_generation` does the first time the context passes
    `original_max_position_embeddings`): `generate` then computes the full forward."""
    prepare = getattr(decoders.module, "prepare_inputs_for_generation", None)
    if decoders.flat or prepare is None or cached.cache is None:
        return False
    import torch

    try:
        inputs = prepare(torch.from_numpy(whole), past_key_values=cached.cache,
                         attention_mask=torch.from_numpy(mask))
    except Exception:  # a generation of its own that cannot be asked so: its loop is its cache's
        return False
    return inputs.get("past_key_values") is None


def onnx_full_prefix(expected: TorchPrefix, session: Session, decoders: Decoders,
                     last: dict[int, np.ndarray], tolerance: tuple[float, float]) -> FullPrefix:
    """The file's side: `last`, its last-step logits per chunk (by first row) from the
    generation check's replay; each threshold's prefix and steps run on `session`."""
    lengths = [compared(item, last[item.first_row], tolerance) for item in expected.last]
    for prefix, steps in expected.thresholds:
        onnx_side = OnnxDecoder(session, decoders.shape, decoders.dtype)
        prefill(onnx_side, prefix.ids, prefix.mask)
        mask = prefix.mask
        for token, item in zip(prefix.tokens, steps, strict=True):
            mask = np.concatenate([mask, np.ones((len(mask), 1), dtype=np.int64)], axis=1)
            lengths.append(compared(item, onnx_side.step(token, mask).logits[:, -1], tolerance))
    return FullPrefix(tuple(lengths), BUILT if expected.thresholds else "")


def compared(item: Expected, actual: np.ndarray, tolerance: tuple[float, float]) -> PrefixLength:
    """The file's last-position logits against the full forward's and the cached loop's, on
    the live rows."""
    rows = np.flatnonzero(item.live)
    full, cached = item.full[rows].astype(np.float64), item.cached[rows].astype(np.float64)
    file = actual[rows].astype(np.float64)
    outside, worst = _outside(file, full, tolerance)
    cached_outside, cached_worst = _outside(file, cached, tolerance)
    other = file.argmax(-1) != full.argmax(-1)
    differing = tuple(item.first_row + int(rows[row]) for row in np.flatnonzero(outside | other))
    first = next((row for row in np.flatnonzero(other)), None)
    token = None if first is None else (item.first_row + int(rows[first]),
                                        int(file[first].argmax()), int(full[first].argmax()))
    return PrefixLength(item.total, item.threshold, worst, cached_worst,
                        int((~other).sum()), len(rows), differing, token, item.recomputes,
                        cached_within=not cached_outside.any())


def _outside(actual: np.ndarray, expected: np.ndarray,
             tolerance: tuple[float, float]) -> tuple[np.ndarray, float]:
    """Per row, whether an element is outside atol + rtol * |expected|; the max difference. By
    the comparison's rule: the same NaN or infinity on both sides is no difference, one on one
    side only an infinite one (a plain subtraction made both NaN, and NaN > atol is False)."""
    rows = [compare_output("logits", 1, expected[row], actual[row], *tolerance)
            for row in range(len(expected))]
    worst = max((row.max_abs_diff or 0.0 for row in rows), default=0.0)
    return np.array([not row.passed for row in rows], dtype=bool), worst
