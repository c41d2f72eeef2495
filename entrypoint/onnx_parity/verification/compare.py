"""One output of PyTorch against the same output of onnxruntime, as a value with its evidence.

The rule is numpy's and torch's `allclose` convention with PyTorch as the reference:
an element passes when `|onnx - torch| <= atol + rtol * |torch|`. Integer and bool outputs
(the reference's dtype decides) must match exactly. NaN passes only where the reference has
NaN, and +Inf/-Inf only where the reference has the same infinity; those positions count as
equal (difference 0). All arithmetic is float64 (complex128 for complex outputs) under
`np.errstate(all="ignore")`, so no numeric input makes these functions raise.

Before that, `as_exported` lays PyTorch's value out the way the exporter laid out the ONNX one
when PyTorch's is of a kind the exporters change: a complex tensor as (real, imaginary) pairs,
a Python number as a 0-d tensor. The comparison itself is then the same as for any tensor.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from onnx_parity.models import OutputKind
from onnx_parity.results import OutputComparison


@dataclass(frozen=True)
class _Figures:
    """What one aligned comparison measured, before it becomes an OutputComparison."""

    max_abs_diff: float
    max_rel_diff: float
    mismatched: int
    smallest_passing_atol: float | None
    tolerance_share: float | None = None


def compare_output(output: str, batch_size: int, torch_value: np.ndarray,
                   onnx_value: np.ndarray, atol: float, rtol: float) -> OutputComparison:
    """Compare one output at one batch size; `passed` is the verdict, the rest its evidence.

    Shapes that differ cannot be aligned: diffs and smallest_passing_atol are None, and every
    element of the larger side counts as mismatched (mismatched = total = the larger size).
    """
    reference, candidate = np.asarray(torch_value), np.asarray(onnx_value)
    if reference.shape != candidate.shape:
        return _result(output, batch_size, reference, candidate, None)
    if _is_exact(reference):
        figures = _exact_figures(reference, candidate)
    else:
        figures = _tolerance_figures(reference, candidate, atol, rtol)
    return _result(output, batch_size, reference, candidate, figures)


@dataclass(frozen=True)
class Mask:
    """Where an output is compared (`compare-mask`): the input's values, non-zero = compared,
    and for each of its axes the output's axis it lies along."""

    input: str
    values: np.ndarray
    axes: tuple[int, ...]

    def keep(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """The positions of an output of `shape` to compare; None when the mask does not fit
        that shape (its lengths are not the output's): then every element is compared."""
        if len(self.axes) != self.values.ndim or max(self.axes, default=len(shape)) >= len(shape):
            return None
        order = sorted(range(len(self.axes)), key=lambda index: self.axes[index])
        laid = np.transpose(self.values != 0, order)
        sizes = [1] * len(shape)
        for index in order:
            sizes[self.axes[index]] = self.values.shape[index]
        try:
            return np.broadcast_to(laid.reshape(sizes), shape)
        except ValueError:
            return None


def compare_masked(output: str, batch_size: int, values: tuple[np.ndarray, np.ndarray],
                   tolerance: tuple[float, float], mask: Mask | None) -> OutputComparison:
    """`compare_output` on the positions the mask keeps; the row counts what it left out."""
    reference, candidate = np.asarray(values[0]), np.asarray(values[1])
    keep = (mask.keep(reference.shape)
            if mask is not None and reference.shape == candidate.shape else None)
    if mask is None or keep is None:
        return compare_output(output, batch_size, reference, candidate, *tolerance)
    row = compare_output(output, batch_size, reference[keep], candidate[keep], *tolerance)
    return dataclasses.replace(row, torch_shape=tuple(int(n) for n in reference.shape),
                               onnx_shape=tuple(int(n) for n in candidate.shape),
                               left_out=int(keep.size - np.count_nonzero(keep)),
                               left_out_by=mask.input)


def as_exported(kind: OutputKind, torch_value: np.ndarray,
                onnx_value: np.ndarray) -> np.ndarray | None:
    """PyTorch's value in the exporter's layout of its kind, when the ONNX value has that layout.

    A complex tensor: `torch.view_as_real` of it, when the ONNX value has PyTorch's shape plus
    a last axis of 2 and the matching real dtype (complex64 -> float32, complex128 -> float64).
    A Python number: a 0-d (or 1-element) array of the ONNX dtype, when that dtype is of the
    number's kind (int -> int64, float -> a float dtype, bool -> bool). None otherwise: a plain
    tensor, or a value in another layout, is compared as it is and any mismatch stays.
    """
    reference, candidate = np.asarray(torch_value), np.asarray(onnx_value)
    if kind == "complex" and _real_pairs(reference, candidate):
        return np.stack((reference.real, reference.imag), axis=-1)
    if kind == "number" and _one_number(reference, candidate):
        return reference.astype(candidate.dtype).reshape(candidate.shape)
    return None


def _real_pairs(reference: np.ndarray, candidate: np.ndarray) -> bool:
    if reference.dtype.kind != "c":
        return False
    real = np.finfo(reference.dtype).dtype  # complex64 -> float32, complex128 -> float64
    return candidate.shape == (*reference.shape, 2) and candidate.dtype == real


def _one_number(reference: np.ndarray, candidate: np.ndarray) -> bool:
    if reference.ndim != 0 or candidate.size != 1 or candidate.ndim > 1:
        return False
    if reference.dtype.kind == "i":
        return candidate.dtype == np.int64  # the exporters hold a Python int (a size) as int64
    return reference.dtype.kind == candidate.dtype.kind and reference.dtype.kind in "fb"


def nonfinite_mismatch(torch_value: np.ndarray, onnx_value: np.ndarray,
                       mask: Mask | None = None) -> int:
    """Positions where either side is NaN/Inf and the two are not the same special value
    (among those the mask keeps).

    This is the count behind the engine's nan-or-inf finding. Shapes that differ cannot be
    aligned and count 0 (the shape-mismatch finding covers them).
    """
    reference, candidate = np.asarray(torch_value), np.asarray(onnx_value)
    if reference.shape != candidate.shape:
        return 0
    keep = mask.keep(reference.shape) if mask is not None else None
    if keep is not None:
        reference, candidate = reference[keep], candidate[keep]
    with np.errstate(all="ignore"):
        ref, cand = _working(reference, candidate)
        return int(np.count_nonzero(_special_mismatch(ref, cand)))


@dataclass(frozen=True)
class NonFinite:
    """The NaN and infinities of one comparison, among the positions the mask keeps."""

    mismatched: int  # NaN or an infinity on one side where the other has another value
    torch_nan: int  # PyTorch's own: what the model computes, whatever the export does
    torch_inf: int


def nonfinite_counts(torch_value: np.ndarray, onnx_value: np.ndarray,
                     mask: Mask | None = None) -> NonFinite:
    """`nonfinite_mismatch` with PyTorch's own NaN and infinities beside it: whether the model
    computes them too is what tells an export's NaN from the model's."""
    reference = np.asarray(torch_value)
    keep = (mask.keep(reference.shape) if mask is not None
            and reference.shape == np.shape(onnx_value) else None)
    kept = reference[keep] if keep is not None else reference
    if _is_exact(kept):
        return NonFinite(0, 0, 0)
    values = kept.astype(np.complex128 if kept.dtype.kind == "c" else np.float64)  # bfloat16
    return NonFinite(nonfinite_mismatch(torch_value, onnx_value, mask),
                     int(np.count_nonzero(np.isnan(values))),
                     int(np.count_nonzero(np.isinf(values))))


def _result(output: str, batch_size: int, reference: np.ndarray, candidate: np.ndarray,
            figures: _Figures | None) -> OutputComparison:
    """`figures` is None when the shapes differ: every element of the larger side mismatches."""
    total = reference.size if figures is not None else max(reference.size, candidate.size)
    mismatched = figures.mismatched if figures is not None else total
    return OutputComparison(
        output=output,
        batch_size=batch_size,
        torch_shape=tuple(int(n) for n in reference.shape),
        onnx_shape=tuple(int(n) for n in candidate.shape),
        torch_dtype=reference.dtype.name,
        onnx_dtype=candidate.dtype.name,
        max_abs_diff=figures.max_abs_diff if figures else None,
        max_rel_diff=figures.max_rel_diff if figures else None,
        mismatched=mismatched,
        total=total,
        smallest_passing_atol=figures.smallest_passing_atol if figures else None,
        passed=figures is not None and mismatched == 0,
        tolerance_share=figures.tolerance_share if figures else None,
    )


def _is_exact(reference: np.ndarray) -> bool:
    return reference.dtype.kind in "biu"


def _working(reference: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sides in float64, or complex128 if either is complex."""
    complex_ = reference.dtype.kind == "c" or candidate.dtype.kind == "c"
    dtype = np.complex128 if complex_ else np.float64
    return reference.astype(dtype), candidate.astype(dtype)


def _same_special(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Both NaN, or the same infinity: counted as equal with difference 0."""
    both_nan = np.isnan(ref) & np.isnan(cand)
    same_inf = np.isinf(ref) & np.isinf(cand) & (ref == cand)
    same: np.ndarray = both_nan | same_inf
    return same


def _special_mismatch(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    nonfinite = ~np.isfinite(ref) | ~np.isfinite(cand)
    mismatch: np.ndarray = nonfinite & ~_same_special(ref, cand)
    return mismatch


def _tolerance_figures(reference: np.ndarray, candidate: np.ndarray, atol: float,
                       rtol: float) -> _Figures:
    with np.errstate(all="ignore"):
        ref, cand = _working(reference, candidate)
        finite = np.isfinite(ref) & np.isfinite(cand)
        diff = np.where(finite, np.abs(cand - ref), 0.0)
        scale = rtol * np.abs(ref)
        within = finite & (diff <= atol + scale)
        mismatched = int(np.count_nonzero(~(within | _same_special(ref, cand))))
        unbounded = bool(np.any(_special_mismatch(ref, cand)))
        return _Figures(
            max_abs_diff=math.inf if unbounded else _max(diff),
            max_rel_diff=math.inf if unbounded else _max_relative(diff, ref, finite),
            mismatched=mismatched,
            smallest_passing_atol=None if unbounded else _smallest_atol(diff[finite],
                                                                        scale[finite]),
            tolerance_share=math.inf if unbounded else _share(diff, atol + scale),
        )


def _exact_figures(reference: np.ndarray, candidate: np.ndarray) -> _Figures:
    """Integer/bool reference: any difference is a mismatch and no atol can excuse it."""
    if candidate.dtype == reference.dtype and np.array_equal(candidate, reference):
        return _Figures(0.0, 0.0, 0, 0.0, 0.0)  # the usual case, without the slow exact path
    if candidate.dtype.kind in "biu":
        # Python integers: exact for int64/uint64 values beyond float64's 2**53.
        ref_ints, cand_ints = np.asarray(reference, object), np.asarray(candidate, object)
        diff = np.asarray(np.abs(cand_ints - ref_ints), dtype=np.float64)
        mismatched = int(np.count_nonzero(cand_ints != ref_ints))
        figures = _Figures(_max(diff), 0.0, mismatched, None)
        ref = reference.astype(np.float64)
        relative = _max_relative(diff, ref, np.ones(ref.shape, bool))
    else:
        loose = _tolerance_figures(reference, candidate, 0.0, 0.0)
        figures, relative = loose, loose.max_rel_diff
    return _Figures(figures.max_abs_diff, relative, figures.mismatched,
                    0.0 if figures.mismatched == 0 else None,
                    0.0 if figures.mismatched == 0 else math.inf)


def _share(diff: np.ndarray, allowed: np.ndarray) -> float:
    """max |d| / (atol + rtol*|torch|): 0 where both are 0, infinite where only the bound is."""
    with np.errstate(all="ignore"):
        shares = np.where(diff == 0, 0.0, diff / allowed)
        return _max(shares)


def _max(values: np.ndarray) -> float:
    return float(values.max()) if values.size else 0.0


def _max_relative(diff: np.ndarray, ref: np.ndarray, finite: np.ndarray) -> float:
    """max |d| / |torch| over elements where torch is finite and not 0 (0 if none are)."""
    with np.errstate(all="ignore"):
        usable = finite & (ref != 0)
        return _max(diff[usable] / np.abs(ref[usable]))


def _smallest_atol(diff: np.ndarray, scale: np.ndarray) -> float | None:
    """max(0, |d| - rtol*|torch|), nudged up until it really passes in float64 rounding.

    None when even that is not a finite number (a difference that overflowed float64).
    """
    with np.errstate(all="ignore"):
        atol = float(max(0.0, _max(diff - scale)))
        for _ in range(64):
            if not math.isfinite(atol):
                return None
            if bool(np.all(diff <= atol + scale)):
                return atol
            atol = float(np.nextafter(atol, math.inf))
    return None
