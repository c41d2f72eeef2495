"""The greedy tokens of PyTorch and onnxruntime compared: `generation-mismatch`.

The first step and batch row where the tokens differ (the lowest row at that step) is named
with both tokens, the row's logit difference and PyTorch's top-2 margin there. A margin below
the tolerance is a near-tie: numeric noise of the size the tolerance allows picked between two
equal tokens, so it is a warning; a wider margin means onnxruntime computed another token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding, Severity
from onnx_parity.generation_results import TokenDifference
from onnx_parity.verification.compare import compare_output


@dataclass(frozen=True)
class Miss:
    """One row's tokens differ at one step: both sides' logits for its last position."""

    step: int
    row: int  # among every prompt
    torch_logits: np.ndarray  # (vocab,)
    onnx_logits: np.ndarray


def token_difference(miss: Miss, tolerance: tuple[float, float]) -> TokenDifference:
    expected = miss.torch_logits.astype(np.float64)
    actual = miss.onnx_logits.astype(np.float64)
    top2 = np.sort(expected)[-2:] if expected.size > 1 else np.array([0.0, 0.0])
    margin = float(top2[1] - top2[0])
    atol, rtol = tolerance
    # By the comparison's rule: the same NaN or infinity on both sides is no difference, one
    # on one side only is an infinite one (a plain subtraction makes both NaN).
    compared = compare_output("logits", 1, expected, actual, atol, rtol)
    return TokenDifference(
        step=miss.step, row=miss.row, pytorch_token=int(expected.argmax()),
        onnx_token=int(actual.argmax()), logit_diff=float(compared.max_abs_diff or 0.0),
        margin=margin, near_tie=margin < atol + rtol * abs(float(top2[1])))


def mismatch_finding(difference: TokenDifference, steps: int) -> Finding:
    d = difference
    said = (f"greedy decoding differs first at step {d.step} of {steps}, batch row {d.row}: "
            f"PyTorch picks token {d.pytorch_token}, onnxruntime {d.onnx_token}; the row's max "
            f"logit diff there is {d.logit_diff:.3g} and PyTorch's top-2 margin {d.margin:.3g}")
    details: FindingDetails = {"step": d.step, "row": d.row, "pytorch_token": d.pytorch_token,
               "onnx_token": d.onnx_token, "logit_diff": d.logit_diff, "margin": d.margin,
               "near_tie": d.near_tie}
    if d.near_tie:
        return Finding(
            "generation-mismatch",
            said + ", below the tolerance: a near-tie (two tokens PyTorch scores alike), not a "
            "fault of the export", severity=Severity.WARNING, details=details,
            fix="Nothing to fix if the logit drift per step stays within the tolerance: numeric "
                "noise decided between two near-equal tokens. Prompts without near-ties make "
                "the token check sharper.")
    return Finding("generation-mismatch", said + ", wider than the tolerance: onnxruntime "
                   "computed another token", details=details)


def runtime_mismatch_finding(runtime: str, difference: TokenDifference, steps: int) -> Finding:
    """`runtime`'s own loop (e.g. onnxruntime-genai's generator) picks another token than
    PyTorch for the same unpadded prompt: the first step and prompt row, both tokens."""
    d = difference
    said = (f"{runtime}'s own generator differs from PyTorch's greedy decoding first at token "
            f"{d.step} of {steps} of prompt row {d.row} (unpadded, one prompt at a time): "
            f"PyTorch picks token {d.pytorch_token}, {runtime} {d.onnx_token}; the max logit "
            f"diff there is {d.logit_diff:.3g} and PyTorch's top-2 margin {d.margin:.3g}")
    details: FindingDetails = {"step": d.step, "row": d.row, "pytorch_token": d.pytorch_token,
                               "onnx_token": d.onnx_token, "logit_diff": d.logit_diff,
                               "margin": d.margin, "near_tie": d.near_tie, "runtime": runtime}
    if d.near_tie:
        return Finding("generation-mismatch", said + ", below the tolerance: a near-tie",
                       severity=Severity.WARNING, details=details,
                       fix="Nothing to fix when the margin is this small: numeric noise decided "
                           "between two near-equal tokens. Prompts without near-ties make the "
                           "runtime's check sharper.")
    return Finding(
        "generation-mismatch", said + f", wider than the tolerance: {runtime} computed another "
        "token", details=details,
        fix=f"Compare with onnxruntime's own loop in the report: when it agrees, {runtime}'s "
            "feed differs from the check's (its genai_config.json's inputs, position ids or "
            "cache); run the bundle's genai_config.json through its model builder for your "
            "architecture and compare.")
