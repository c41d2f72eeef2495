"""Properties over random arrays: the comparison agrees with an independent reference and never
raises; sample loading returns a SampleSet or a SampleError, never anything else."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import numpy_helper

from onnx_parity.models.samples.loading import SampleError, SampleSet, load_samples
from onnx_parity.verification.compare import compare_output, nonfinite_mismatch

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.bool_]
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
TOLERANCES = st.sampled_from([0.0, 1e-8, 1e-5, 1e-3, 0.1, 1.0, 1e300])
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def arrays(shape: st.SearchStrategy[tuple[int, ...]] = SHAPES) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(st.sampled_from(DTYPES), shape)


@st.composite
def output_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """(torch, onnx): an unrelated array, a near copy, or a different shape."""
    reference = draw(arrays())
    how = draw(st.sampled_from(["unrelated", "near", "other-shape"]))
    if how == "unrelated":
        return reference, draw(arrays(st.just(reference.shape)))
    if how == "other-shape":
        return reference, draw(arrays())
    noise = draw(hnp.arrays(np.float64, reference.shape,
                            elements=st.floats(-1e-3, 1e-3, allow_subnormal=True)))
    dtype = draw(st.sampled_from([reference.dtype, np.dtype(np.float32)]))
    with np.errstate(all="ignore"):
        return reference, (reference.astype(np.float64) + noise).astype(dtype)


def reference_mismatches(torch_value: np.ndarray, onnx_value: np.ndarray, atol: float,
                         rtol: float) -> int:
    """The rule written independently: numpy's isclose in float64, Python ints for integers."""
    if torch_value.shape != onnx_value.shape:
        return max(torch_value.size, onnx_value.size)
    with np.errstate(all="ignore"):
        if torch_value.dtype.kind in "biu" and onnx_value.dtype.kind in "biu":
            pairs = zip(torch_value.ravel().tolist(), onnx_value.ravel().tolist(), strict=True)
            return sum(int(a) != int(b) for a, b in pairs)
        ref, cand = torch_value.astype(np.float64), onnx_value.astype(np.float64)
        if torch_value.dtype.kind in "biu":
            return int(np.count_nonzero(ref != cand))
        # A NaN or Inf only matches the same NaN or Inf: numpy's isclose alone would let an
        # Inf pass a finite value once rtol * |value| overflows to Inf.
        nonfinite = ~np.isfinite(cand) | ~np.isfinite(ref)
        same = (cand == ref) | (np.isnan(cand) & np.isnan(ref))
        close = np.where(nonfinite, same, np.isclose(cand, ref, rtol=rtol, atol=atol))
        return int(torch_value.size - np.count_nonzero(close))


@PROPERTY
@given(pair=output_pairs(), atol=TOLERANCES, rtol=TOLERANCES)
# Found by hypothesis: float32 overflows to Inf just above its range; rtol * |torch| is Inf too.
@example(pair=(np.array(3.40282357e+38), np.array(np.float32(np.inf))), atol=0.0, rtol=1e300)
def test_compare_matches_reference_and_never_raises(pair: tuple[np.ndarray, np.ndarray],
                                                    atol: float, rtol: float) -> None:
    torch_value, onnx_value = pair
    result = compare_output("y", 1, torch_value, onnx_value, atol, rtol)
    expected = reference_mismatches(torch_value, onnx_value, atol, rtol)
    assert result.mismatched == expected
    assert result.passed == (expected == 0 and torch_value.shape == onnx_value.shape)
    assert result.total == max(torch_value.size, onnx_value.size)
    assert nonfinite_mismatch(torch_value, onnx_value) <= result.mismatched


@PROPERTY
@given(pair=output_pairs(), rtol=TOLERANCES)
def test_smallest_passing_atol_is_tight(pair: tuple[np.ndarray, np.ndarray], rtol: float
                                        ) -> None:
    torch_value, onnx_value = pair
    first = compare_output("y", 1, torch_value, onnx_value, 0.0, rtol)
    atol = first.smallest_passing_atol
    if atol is None:
        assert not first.passed
        return
    assert compare_output("y", 1, torch_value, onnx_value, atol, rtol).passed
    if torch_value.dtype.kind in "biu":
        assert atol == 0.0  # exact outputs: passing means equal, and no atol helps otherwise
        return
    with np.errstate(all="ignore"):
        ref = np.abs(torch_value.astype(np.float64))
        finite_ref = ref[np.isfinite(ref)]
        largest = float(finite_ref.max()) if finite_ref.size else 0.0
        margin = 8 * float(np.spacing(atol + rtol * largest))
    if atol - margin > 0:  # outside float64 rounding noise, a smaller atol must fail
        assert not compare_output("y", 1, torch_value, onnx_value, atol - margin, rtol).passed


def save(array: np.ndarray, path: Path) -> None:
    if path.suffix == ".npy":
        np.save(path, array)
    elif path.suffix == ".npz":
        np.savez(path, x=array)
    elif path.suffix == ".pt":
        torch.save(torch.from_numpy(np.array(array)), path)
    else:
        path.write_bytes(numpy_helper.from_array(array, "x").SerializeToString())


SUFFIXES = st.sampled_from([".npy", ".npz", ".pt", ".pb"])


@PROPERTY
@given(array=arrays(), suffix=SUFFIXES)
def test_saved_arrays_load_back_or_are_refused(array: np.ndarray, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        path = repo / f"x{suffix}"
        save(array, path)
        if array.ndim == 0 or array.shape[0] == 0:
            # An array without samples is refused, naming its file.
            with pytest.raises(SampleError, match=re.escape("x" + suffix)):
                load_samples({"x": path}, repo)
            return
        loaded = load_samples({"x": path}, repo).named["x"]
    assert loaded.dtype == array.dtype
    assert loaded.shape == array.shape
    np.testing.assert_array_equal(loaded, array)  # NaN positions must match too


@st.composite
def garbled(draw: st.DrawFn, data: bytes) -> bytes:
    if draw(st.booleans()):
        return data[: draw(st.integers(0, len(data)))]
    changed = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        changed[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(changed)


@PROPERTY
@given(array=arrays(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)),
       suffix=SUFFIXES, data=st.data(), bundle=st.booleans())
def test_garbled_files_give_a_sample_set_or_a_sample_error(array: np.ndarray, suffix: str,
                                                           data: st.DataObject,
                                                           bundle: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        path = repo / f"x{suffix}"
        save(array, path)
        path.write_bytes(data.draw(garbled(path.read_bytes())))
        try:
            result = load_samples(path if bundle else {"x": path}, repo)
        except SampleError as error:
            message, fix = str(error), error.fix
        else:
            assert isinstance(result, SampleSet)
            assert all(a.ndim >= 1 and a.shape[0] >= 1 for a in result.named.values())
            return
    assert f"x{suffix}" in message  # a refusal names the file and says the fix, once:
    assert "Fix:" not in message  # the fix is the error's own field
    assert fix
