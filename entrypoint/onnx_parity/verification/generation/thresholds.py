"""Decoding steps across every position threshold of a generating model: `position-threshold`.

A threshold T (models/generating/thresholds.py) below the model's context gets one-token steps
at total lengths T - 1, T and T + 1 (past lengths T - 2, T - 1, T), from a past built to T - 2
(threshold_past.py), each side then feeding its own cache back and both fed
PyTorch's greedy token, as the generation check does. A step whose logits are outside the
tolerance, or whose greedy token differs, fails: `position-threshold` names the config key, its
value, the past length, the max logit difference and the rows that differ, with a fix that
works on the pinned stack (measured, docs/generation.md).

The cached loop itself fails it too (`cached_loop_findings`): past a threshold where the model's
own generation drops its cache and recomputes the prefix, the file agreeing with the model's
forward with cache but not with its full forward over the same prefix (full_prefix.py) computes
what every runtime feeding presents back computes, not what `generate` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding
from onnx_parity.generation_results import FullPrefix, PrefixLength, ThresholdRun, ThresholdStep
from onnx_parity.models import PositionLimits, Threshold
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import StepOutput
from onnx_parity.verification.generation.threshold_past import (
    BuiltPast,
    PastSide,
    build_past,
    sides,
)
from onnx_parity.verification.run_failures import runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure, Session

_CAP = ("or deploy the model no longer than the threshold (generation's max length at most "
        "{value}) and set max-context = {value} in `generate`")
FIXES = {
    "original_max_position_embeddings":
        "Export with transformers 5's LongRoPE, which switches factors with torch.where over "
        "both sets inside the graph (measured: a tiny Phi3 with the threshold at 32 agrees "
        "within 6e-08 at past 30 to 32 through dynamo); a rotary embedding of your own that "
        "picks long_factor with a Python `if` is baked at the export's length: compute both "
        "and select with torch.where(seq_len > {value}, long, short), " + _CAP,
    "max_position_embeddings":
        "Dynamic NTK recomputes its frequencies with a Python `if` on the length, which dynamo "
        "refuses and TorchScript bakes at the export's length; compute them from the tensor "
        "length on every call instead (transformers' _compute_dynamic_ntk_parameters(config, "
        "seq_len=torch.max(position_ids) + 1), which takes torch.maximum(seq_len, {value}): "
        "measured on a tiny Llama, the same logits as transformers' dynamic rope and a dynamo "
        "file within 6e-08 across the threshold), " + _CAP,
    "sliding_window":
        "Export the step with a cache of full layers and the window applied by the mask "
        "(dynamo, as this tool exports transformers models: a Mistral, a Qwen2 and a Gemma3 "
        "with a window of 4 measured within 1.2e-07 across it), " + _CAP,
    "attention_chunk_size":
        "Export with the chunk applied by the mask over a cache of full layers (dynamo), "
        + _CAP,
}
_DEFAULT_FIX = "Compute both sides of the length's test in the graph (torch.where), " + _CAP


class Stepper(Protocol):
    """One side of the steps: a token (rows, 1) and the whole mask -> the step's output."""

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput: ...


# Both sides holding a built past: PyTorch's, then the file's.
Sides = Callable[[PastSide, Session, BuiltPast], tuple[Stepper, Stepper]]


@dataclass(frozen=True)
class ThresholdCheck:
    """What the steps are run with, beside the thresholds: the built past's side, the file's
    session, the prompt rows (ids, mask) and the tolerance (atol, rtol). `sides`: the two
    sides holding the built past (a decoder's by default; a vision-language pipeline's from
    vision_language/thresholds.py); `rows`: which prompt rows the past was built from, when
    not the first batch as given (said first in the run's `built`)."""

    side: PastSide
    session: Session
    prompts: tuple[np.ndarray, np.ndarray]
    tolerance: tuple[float, float]
    sides: Sides = sides
    rows: str = ""


@dataclass
class ThresholdsChecked:
    runs: tuple[ThresholdRun, ...] = ()
    findings: list[Finding] = field(default_factory=list)


def check_thresholds(decoders: Decoders, prompts: dict[str, np.ndarray], spec: ModelSpec,
                     limits: PositionLimits, session: Session | None) -> ThresholdsChecked:
    """A decoder-only model's thresholds crossed on its first batch of prompts (the largest
    configured batch size), in the session the generation check ran (None: the file did not
    run, which the generation check's findings say; nothing is crossed). A decoder with no
    cache has no cached loop to cross them with: its every step is the whole prefix."""
    if (decoders.encoder is not None or decoders.shape.whole_prefix or not limits.thresholds
            or session is None):
        return ThresholdsChecked()
    size = max(spec.batch_sizes)
    rows = tuple(np.asarray(prompts[name])[:size].astype(np.int64)
                 for name in ("input_ids", "attention_mask"))
    side = PastSide(decoders.module, decoders.shape, decoders.flat, dict(spec.forward_kwargs),
                    decoders.dtype)
    return crossed(ThresholdCheck(side, session, (rows[0], rows[1]), (spec.atol, spec.rtol)),
                   limits)


def crossed(check: ThresholdCheck, limits: PositionLimits) -> ThresholdsChecked:
    """Every threshold of `limits`: crossed when below the context, else recorded as skipped;
    onnxruntime failing at a step is a runtime-error finding."""
    try:
        return _judged(check, limits)
    except RuntimeFailure as error:
        return ThresholdsChecked(findings=[runtime_finding(
            "onnxruntime fails at a position threshold's decoding step", error)])


def _judged(check: ThresholdCheck, limits: PositionLimits) -> ThresholdsChecked:
    """Each PyTorch step is one run (models/module_state.py): a dynamic rope that grows its
    tables at a long past leaves them as they settled."""
    runs: list[ThresholdRun] = []
    for threshold in limits.thresholds:
        skipped = _skipped(check, limits, threshold)
        if skipped is None:
            runs.append(_crossed(check, threshold))
        else:
            runs.append(ThresholdRun(threshold.key, threshold.value, threshold.layers, (),
                                     skipped=skipped))
    findings = [_finding(run, threshold, check.tolerance)
                for run, threshold in zip(runs, limits.thresholds, strict=True)
                if not run.passed]
    return ThresholdsChecked(tuple(runs), findings)


def _skipped(check: ThresholdCheck, limits: PositionLimits, threshold: Threshold) -> str | None:
    """Why a threshold is recorded and not crossed, or None."""
    if not limits.crossed(threshold):
        return (f"at or past the context ({limits.context_key} = {limits.context}): set "
                "max-context in `generate` to the length you deploy to check it")
    if check.side.shape.states:
        return ("a hybrid model's conv and recurrent states are not built at scale (the past "
                "is built of keys and values): the threshold is recorded, not crossed")
    return None


def past_lengths(value: int) -> tuple[int, ...]:
    """The past lengths the steps run at: T - 2, T - 1 and T (the first at least 1)."""
    return tuple(range(max(1, value - 2), value + 1))


def _crossed(check: ThresholdCheck, threshold: Threshold) -> ThresholdRun:
    lengths = past_lengths(threshold.value)
    built = build_past(check.side, check.prompts, lengths[0])
    return ThresholdRun(threshold.key, threshold.value, threshold.layers,
                        _steps(check, built, len(lengths)), check.rows + built.described())


def _steps(check: ThresholdCheck, built: BuiltPast, count: int) -> tuple[ThresholdStep, ...]:
    torch_side, onnx_side = check.sides(check.side, check.session, built)
    mask, token = built.mask, built.token
    steps = []
    for _ in range(count):
        past = mask.shape[1]
        mask = np.concatenate([mask, np.ones((len(mask), 1), dtype=np.int64)], axis=1)
        expected = torch_side.step(token, mask).logits[:, -1]
        actual = onnx_side.step(token, mask).logits[:, -1]
        steps.append(_compared(past, expected, actual, check.tolerance))
        token = expected.argmax(-1)[:, None].astype(np.int64)
    return tuple(steps)


def _compared(past: int, expected: np.ndarray, actual: np.ndarray,
              tolerance: tuple[float, float]) -> ThresholdStep:
    """One step's last-position logits, (rows, vocab) on each side, each row by the
    comparison's rule: the same NaN or infinity on both sides passes, one on one side only
    fails with an infinite difference."""
    rows = [compare_output("logits", 1, e, a, *tolerance)
            for e, a in zip(expected, actual, strict=True)]
    agree = expected.argmax(-1) == actual.argmax(-1)
    worst = max((row.max_abs_diff or 0.0 for row in rows), default=0.0)
    return ThresholdStep(past, worst, int(agree.sum()), len(agree),
                         tuple(index for index, row in enumerate(rows)
                               if not row.passed or not agree[index]))


def _finding(run: ThresholdRun, threshold: Threshold, tolerance: tuple[float, float]) -> Finding:
    failed = next(step for step in run.steps if step.differing_rows)
    rows = ", ".join(map(str, failed.differing_rows))
    where = ("past it" if failed.past >= run.value else
             "below it already, so not only the threshold's doing")
    others = "; ".join(f"past {step.past}: {step.max_logit_diff:.2g}" for step in run.steps
                       if step is not failed)
    layers = f" (layers {', '.join(map(str, run.layers))})" if run.layers else ""
    message = (f"`{run.key}` = {run.value}{layers}: {threshold.why}. The step at past length "
               f"{failed.past} ({failed.past + 1} positions, {where}) differs: max logit diff "
               f"{failed.max_logit_diff:.3g} (atol {tolerance[0]:g}), rows {rows} outside the "
               f"tolerance or picking another token ({failed.tokens_agree}/{failed.rows} greedy "
               f"tokens agree); {others}. The past was built: {run.built}")
    return Finding("position-threshold", message,
                   fix=FIXES.get(run.key, _DEFAULT_FIX).format(value=run.value),
                   details={"config_key": run.key, "threshold": run.value,
                            "past_length": failed.past, "max_abs_diff": failed.max_logit_diff,
                            "rows": list(failed.differing_rows)})


_RECOMPUTE_FIX = (
    "Run the whole prefix through the file again (a prompt pass with an empty past) once the "
    "context passes {value} positions, as transformers' generate does, then feed presents back "
    "from there; or, when the deployed context never passes {value}, deploy it no longer "
    "(generation's max length at most {value}) and set max-context = {value} in `generate`, so "
    "the check stops short of it too")


def cached_loop_findings(full: FullPrefix, limits: PositionLimits,
                         tolerance: tuple[float, float]) -> list[Finding]:
    """`position-threshold` for each crossed threshold where the model's own generation drops
    its cache (so `generate` computes the full forward) and some later length has the file
    within the tolerance of the forward with cache but not of the full forward."""
    findings = []
    for threshold in limits.thresholds:
        own = [item for item in full.lengths if item.threshold == threshold.value]
        wrong = [item for item in full.lengths if item.total > threshold.value
                 and item.differing_rows and item.cached_within]
        if wrong and any(item.recomputes for item in own):
            findings.append(_cached_loop_finding(threshold, wrong, full.lengths, tolerance))
    return findings


def _cached_loop_finding(threshold: Threshold, wrong: list[PrefixLength],
                         lengths: tuple[PrefixLength, ...],
                         tolerance: tuple[float, float]) -> Finding:
    first, value = wrong[0], threshold.value
    token = next((item for item in wrong if item.first_token is not None), None)
    said = ("the greedy tokens still agree at every length compared" if token is None
            or token.first_token is None else
            "first token that differs: prompt row {0} at {3} positions, the file's {1} against the "
            "full forward's {2}".format(*token.first_token, token.total))
    others = "; ".join(f"{item.total} positions: {item.max_logit_diff:.2g}" for item in lengths
                       if item is not first)
    layers = f" (layers {', '.join(map(str, threshold.layers))})" if threshold.layers else ""
    message = (
        f"`{threshold.key}` = {value}{layers}: {threshold.why}. The file with its presents fed "
        f"back agrees with the model's forward with its cache at {first.total} positions (max "
        f"logit diff {first.cached_diff:.2g}) but not with the model's own full forward over "
        f"the same {first.total} positions with no cache: max logit diff "
        f"{first.max_logit_diff:.3g} (atol {tolerance[0]:g}), rows "
        f"{', '.join(map(str, first.differing_rows))}; {said}. The model's own generation drops "
        f"its cache crossing {value} positions (its prepare_inputs_for_generation) and "
        "recomputes the whole prefix, so transformers' generate computes the full forward's "
        "values; the positions cached before the threshold keep what was computed for them, "
        "and a runtime feeding presents back (onnxruntime-genai, optimum) computes the same "
        f"wrong values as this file. Full forward against the file at the other lengths "
        f"compared: {others}")
    details: FindingDetails = {
        "config_key": threshold.key, "threshold": value, "past_length": first.total - 1,
        "max_abs_diff": first.max_logit_diff, "rows": list(first.differing_rows)}
    if token is not None and token.first_token is not None:
        details["row"], details["onnx_token"], details["pytorch_token"] = token.first_token
    return Finding("position-threshold", message, fix=_RECOMPUTE_FIX.format(value=value),
                   details=details)
