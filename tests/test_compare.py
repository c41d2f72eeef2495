"""The comparison rule and its figures, on hand-built arrays whose numbers are worked out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnx_parity.models.batches import BatchCut, batch_plan, cut_batch
from onnx_parity.verification.compare import compare_output, nonfinite_mismatch

ATOL, RTOL = 1e-5, 1e-4


def test_difference_beyond_tolerance_at_one_element() -> None:
    torch_value = np.zeros((2, 3), np.float64)
    onnx_value = torch_value.copy()
    onnx_value[1, 2] = 3e-5  # reference 0 -> allowed only atol = 1e-5
    result = compare_output("logits", 4, torch_value, onnx_value, ATOL, RTOL)
    assert not result.passed
    assert result.mismatched == 1
    assert result.total == 6
    assert result.max_abs_diff == 3e-5
    assert result.max_rel_diff == 0.0  # the only difference sits where the reference is 0
    assert result.smallest_passing_atol == pytest.approx(3e-5, rel=1e-12)
    assert result.mismatched_percent == pytest.approx(100 / 6)
    assert (result.output, result.batch_size) == ("logits", 4)
    assert result.torch_shape == result.onnx_shape == (2, 3)


def test_relative_term_uses_the_torch_value_as_reference() -> None:
    torch_value = np.array([1000.0, 2.0])
    onnx_value = np.array([1000.05, 2.0])
    # allowed at element 0: 1e-5 + 1e-4 * 1000 = 0.10001 >= 0.05
    result = compare_output("y", 1, torch_value, onnx_value, ATOL, RTOL)
    assert result.passed
    assert result.mismatched == 0
    assert result.max_abs_diff == pytest.approx(0.05, rel=1e-9)
    assert result.max_rel_diff == pytest.approx(0.05 / 1000, rel=1e-9)
    assert result.smallest_passing_atol == 0.0
    # Swapping the sides changes the allowance only through |torch|: here 1e-4 * 1000.05.
    swapped = compare_output("y", 1, onnx_value, torch_value, 0.0, 0.05 / 1000.05)
    assert swapped.passed


def test_float32_values_compared_in_float64() -> None:
    torch_value = np.array([1.0], np.float32)
    onnx_value = np.array([np.nextafter(np.float32(1.0), np.float32(2.0))], np.float32)
    expected = float(onnx_value[0]) - 1.0  # 2**-23
    result = compare_output("y", 1, torch_value, onnx_value, 0.0, 0.0)
    assert result.max_abs_diff == expected == 2.0 ** -23
    assert result.smallest_passing_atol == expected
    assert (result.torch_dtype, result.onnx_dtype) == ("float32", "float32")


def test_integers_must_match_exactly_whatever_the_tolerance() -> None:
    torch_value = np.array([[5, 7, 9]], np.int64)
    onnx_value = np.array([[5, 8, 9]], np.int64)
    result = compare_output("ids", 1, torch_value, onnx_value, atol=10.0, rtol=1.0)
    assert not result.passed
    assert result.mismatched == 1
    assert result.max_abs_diff == 1.0
    assert result.max_rel_diff == pytest.approx(1 / 7)
    assert result.smallest_passing_atol is None  # no atol excuses an integer difference
    same = compare_output("ids", 1, torch_value, torch_value.copy(), 0.0, 0.0)
    assert same.passed
    assert same.smallest_passing_atol == 0.0


def test_int64_beyond_float64_precision_is_still_exact() -> None:
    big = 2 ** 62
    result = compare_output("h", 1, np.array([big], np.int64), np.array([big + 1], np.int64),
                            ATOL, RTOL)
    assert not result.passed
    assert result.mismatched == 1
    assert result.max_abs_diff == 1.0


def test_bool_outputs_must_match_exactly() -> None:
    torch_value = np.array([True, False, True])
    onnx_value = np.array([True, True, True])
    result = compare_output("mask", 2, torch_value, onnx_value, ATOL, RTOL)
    assert not result.passed
    assert result.mismatched == 1
    assert result.max_abs_diff == 1.0
    assert result.torch_dtype == "bool"


def test_dtype_difference_is_recorded_and_values_still_compared() -> None:
    torch_value = np.array([1.5, 2.5], np.float32)
    onnx_value = np.array([1.5, 2.5], np.float64)
    result = compare_output("y", 1, torch_value, onnx_value, ATOL, RTOL)
    assert result.passed
    assert (result.torch_dtype, result.onnx_dtype) == ("float32", "float64")
    ints = compare_output("y", 1, np.array([3], np.int64), np.array([3.0], np.float32), 0, 0)
    assert ints.passed
    assert ints.onnx_dtype == "float32"


def test_nan_and_same_infinity_count_as_equal() -> None:
    torch_value = np.array([np.nan, np.inf, -np.inf, 1.0])
    onnx_value = np.array([np.nan, np.inf, -np.inf, 1.0])
    result = compare_output("y", 1, torch_value, onnx_value, 0.0, 0.0)
    assert result.passed
    assert result.max_abs_diff == 0.0
    assert result.smallest_passing_atol == 0.0
    assert nonfinite_mismatch(torch_value, onnx_value) == 0


@pytest.mark.parametrize(("torch_item", "onnx_item"), [
    (np.nan, 1.0), (1.0, np.nan), (np.inf, -np.inf), (np.inf, 1e300), (2.0, -np.inf),
])
def test_nonfinite_mismatch_fails_and_no_atol_can_pass(torch_item: float, onnx_item: float
                                                       ) -> None:
    torch_value = np.array([torch_item, 0.5])
    onnx_value = np.array([onnx_item, 0.5])
    result = compare_output("y", 1, torch_value, onnx_value, ATOL, RTOL)
    assert not result.passed
    assert result.mismatched == 1
    assert result.smallest_passing_atol is None
    assert result.max_abs_diff == math.inf
    assert nonfinite_mismatch(torch_value, onnx_value) == 1


def test_shape_mismatch_counts_every_element_of_the_larger_side() -> None:
    result = compare_output("y", 4, np.zeros((4, 10)), np.zeros((1, 10)), ATOL, RTOL)
    assert not result.passed
    assert (result.mismatched, result.total) == (40, 40)
    assert result.max_abs_diff is None
    assert result.smallest_passing_atol is None
    assert (result.torch_shape, result.onnx_shape) == ((4, 10), (1, 10))
    assert nonfinite_mismatch(np.zeros((4, 10)), np.zeros((1, 10))) == 0


def test_empty_tensors_pass_with_zero_diffs() -> None:
    result = compare_output("y", 1, np.zeros((0, 3), np.float32), np.zeros((0, 3)), 0.0, 0.0)
    assert result.passed
    assert result.total == 0
    assert result.mismatched_percent == 0.0
    assert result.max_abs_diff == 0.0
    assert result.smallest_passing_atol == 0.0


def test_huge_values_never_raise() -> None:
    top = np.finfo(np.float64).max
    result = compare_output("y", 1, np.array([top, -top]), np.array([-top, top]), ATOL, RTOL)
    assert not result.passed
    assert result.mismatched == 2
    # The difference overflows float64: no finite atol would pass.
    assert result.smallest_passing_atol is None


def test_smallest_passing_atol_fed_back_passes_and_a_smaller_one_fails() -> None:
    rng = np.random.default_rng(7)
    torch_value = rng.normal(size=(3, 50)).astype(np.float32)
    onnx_value = torch_value + rng.normal(scale=1e-3, size=(3, 50)).astype(np.float32)
    first = compare_output("y", 1, torch_value, onnx_value, ATOL, RTOL)
    assert not first.passed
    assert first.smallest_passing_atol is not None
    atol = first.smallest_passing_atol
    assert compare_output("y", 1, torch_value, onnx_value, atol, RTOL).passed
    assert not compare_output("y", 1, torch_value, onnx_value, atol * (1 - 1e-9), RTOL).passed


def test_cut_batch_takes_consecutive_samples_and_wraps() -> None:
    samples = np.arange(3 * 2).reshape(3, 2)
    np.testing.assert_array_equal(cut_batch(samples, 0, 2), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(cut_batch(samples, 2, 4)[:, 0], [4, 0, 2, 4])
    batch = cut_batch(samples, 0, 1)
    batch[0, 0] = 99
    assert samples[0, 0] == 0  # a copy, never a view


def test_cut_batch_refuses_no_samples_and_size_zero() -> None:
    with pytest.raises(ValueError, match="at least one sample along axis 0"):
        cut_batch(np.zeros((0, 2)), 0, 1)
    with pytest.raises(ValueError, match="batch size must be at least 1, not 0"):
        cut_batch(np.zeros((2, 2)), 0, 0)


def test_batch_plan_covers_every_sample() -> None:
    plan = batch_plan(10, (1, 4))
    assert plan[:2] == (BatchCut(1, 0), BatchCut(1, 1))
    assert len(plan) == 10 + 3
    assert [cut.start for cut in plan if cut.size == 4] == [0, 4, 8]
    covered = {i % 10 for cut in plan if cut.size == 4 for i in range(cut.start, cut.start + 4)}
    assert covered == set(range(10))
    assert batch_plan(3, (8,)) == (BatchCut(8, 0),)
