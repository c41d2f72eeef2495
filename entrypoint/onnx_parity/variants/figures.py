"""How close a variant's output stays to PyTorch's fp32 output: the figures of one comparison.

max abs diff; SQNR in dB, 20*log10(|ref| / |ref - out|) over the whole tensor (inf when the two
are identical); cosine similarity of the flattened tensors; and for float outputs of rank >= 2
whose last axis holds scores, top-1 agreement: the share of rows whose argmax agrees.
Arithmetic in float64, NaN/Inf never raising (they make the figures NaN/inf, and nan-or-inf
reports them).
"""

from __future__ import annotations

import math

import numpy as np

from onnx_parity.results import VariantComparison


def compare_variant(output: str, batch_size: int, input_shapes: dict[str, tuple[int, ...]],
                    reference: np.ndarray, candidate: np.ndarray) -> VariantComparison:
    if reference.shape != candidate.shape or reference.dtype.kind not in "fc":
        return VariantComparison(output, batch_size, input_shapes, None, None, None, None)
    with np.errstate(all="ignore"):
        ref, out = reference.astype(np.float64).ravel(), candidate.astype(np.float64).ravel()
        return VariantComparison(
            output=output, batch_size=batch_size, input_shapes=input_shapes,
            max_abs_diff=float(np.max(np.abs(out - ref))) if ref.size else 0.0,
            sqnr_db=sqnr_db(ref, out), cosine=_cosine(ref, out),
            top1_agreement=_top1(reference, candidate),
        )


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    signal = float(np.linalg.norm(reference))
    noise = float(np.linalg.norm(reference - candidate))
    if not math.isfinite(noise):
        return -math.inf
    if noise == 0.0:
        return math.inf
    return 20.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def _cosine(reference: np.ndarray, candidate: np.ndarray) -> float | None:
    norms = float(np.linalg.norm(reference)) * float(np.linalg.norm(candidate))
    if norms == 0.0 or not math.isfinite(norms):
        return None
    return float(np.dot(reference, candidate) / norms)


def holds_scores(value: np.ndarray) -> bool:
    """Class scores: a float output of rank >= 2 whose last axis has several entries."""
    return value.dtype.kind == "f" and value.ndim >= 2 and value.shape[-1] >= 2


def _top1(reference: np.ndarray, candidate: np.ndarray) -> float | None:
    if not holds_scores(reference):
        return None
    agree = np.argmax(reference, axis=-1) == np.argmax(candidate, axis=-1)
    return float(np.mean(agree)) if agree.size else None
