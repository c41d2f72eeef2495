"""Outputs as each exporter lays them out: complex tensors and Python numbers.

dynamo exports a complex output as a real tensor with a last axis of 2 (real, imaginary);
PyTorch's value is compared as `torch.view_as_real` of it, with an `output-layout` note. A
Python number forward returns (`x.shape[0]`) is kept by both exporters as a one-element
int64 output (dynamo's `sym_size_int_1`, TorchScript's numbered output) and compared as a 0-d
value. Anything else in another layout keeps its shape or dtype mismatch.

The unit tests take the rule on arrays; the command-line test writes a fresh repository into
tmp_path and runs the real CLI on it, once for all its models.
"""

from __future__ import annotations

import numpy as np
import pytest

from fixture_repo.harness import CliRun, run_cli
from onnx_parity.verification.compare import as_exported, compare_output
from onnx_parity.verification.outputs import Relaid, layout_notes

# -- PyTorch's side keeps each output's kind --------------------------------------------------


def test_the_reference_keeps_tensors_complex_tensors_and_python_numbers() -> None:
    import torch

    from onnx_parity.models.reference import flatten_outputs

    spectrum = torch.fft.rfft(torch.ones(2, 4))
    reference = flatten_outputs({"z": spectrum, "rest": (torch.ones(3), 2, 0.5, True, None,
                                                         "text", spectrum.conj())})
    assert reference.names == ("z", "rest.0", "rest.1", "rest.2", "rest.3", "rest.6")
    assert reference.kinds == ("complex", "tensor", "number", "number", "number", "complex")
    assert [a.dtype.name for a in reference.arrays] == ["complex64", "float32", "int64",
                                                       "float64", "bool", "complex64"]
    assert reference.arrays[2].shape == ()
    assert np.array_equal(reference.arrays[5], spectrum.numpy().conj())  # conj view resolved


# -- the layout rule, on arrays ---------------------------------------------------------------


def spectrum(rng: np.random.Generator, dtype: type = np.complex64) -> np.ndarray:
    return (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(dtype)


def test_a_complex_output_is_compared_as_real_imaginary_pairs() -> None:
    torch_value = spectrum(np.random.default_rng(0))
    pairs = np.stack((torch_value.real, torch_value.imag), axis=-1)
    laid = as_exported("complex", torch_value, pairs)
    assert laid is not None
    assert laid.dtype == np.float32
    assert np.array_equal(laid, pairs)
    double = spectrum(np.random.default_rng(0), np.complex128)
    assert as_exported("complex", double, double.view(np.float64).reshape(3, 5, 2)) is not None


@pytest.mark.parametrize(("shape", "dtype"), [
    ((3, 5), np.float32),  # no (real, imaginary) axis
    ((3, 5, 3), np.float32),  # a last axis that is not a pair
    ((3, 6, 2), np.float32),  # another length
    ((3, 5, 2), np.float64),  # not complex64's real dtype
], ids=["no-pair-axis", "axis-of-3", "other-length", "float64"])
def test_a_complex_output_in_another_layout_keeps_its_mismatch(shape, dtype) -> None:
    torch_value = spectrum(np.random.default_rng(0))
    onnx_value = np.zeros(shape, dtype)
    assert as_exported("complex", torch_value, onnx_value) is None
    row = compare_output("z", 3, torch_value, onnx_value, 1e-5, 1e-4)
    assert not row.passed
    assert (row.torch_shape, row.torch_dtype) == ((3, 5), "complex64")


def test_a_complex_difference_is_measured_like_any_tensor() -> None:
    """One imaginary part off by 0.01: the figures of one element of 30, exactly as for floats."""
    torch_value = spectrum(np.random.default_rng(0))
    pairs = np.stack((torch_value.real, torch_value.imag), axis=-1)
    pairs[1, 2, 1] += np.float32(0.01)
    laid = as_exported("complex", torch_value, pairs)
    assert laid is not None
    row = compare_output("z", 3, laid, pairs, 1e-5, 0.0)
    assert not row.passed
    assert (row.mismatched, row.total) == (1, 30)
    assert row.max_abs_diff == pytest.approx(0.01, rel=1e-4)
    assert row.smallest_passing_atol == pytest.approx(0.01, rel=1e-4)
    assert (row.torch_shape, row.onnx_shape) == ((3, 5, 2), (3, 5, 2))


@pytest.mark.parametrize(("number", "onnx_value"), [
    (3, np.array(3, np.int64)),
    (3, np.array([3], np.int64)),
    (0.25, np.array(0.25, np.float32)),
    (0.25, np.array(0.25, np.float64)),
    (True, np.array(True)),
], ids=["int-0d", "int-1-element", "float32", "float64", "bool"])
def test_a_python_number_is_compared_as_a_0d_value(number, onnx_value) -> None:
    laid = as_exported("number", np.asarray(number), onnx_value)
    assert laid is not None
    row = compare_output("n", 2, laid, onnx_value, 1e-5, 1e-4)
    assert row.passed
    assert (row.torch_dtype, row.torch_shape) == (onnx_value.dtype.name, onnx_value.shape)
    wrong = compare_output("n", 2, laid, onnx_value + 1, 1e-5, 1e-4)
    assert (wrong.passed, wrong.mismatched, wrong.total) == (False, 1, 1)


@pytest.mark.parametrize(("number", "onnx_value"), [
    (3, np.array(3.0, np.float32)),  # an int the ONNX model gives as a float
    (3, np.array(3, np.int32)),
    (0.25, np.array(0, np.int64)),
    (3, np.array([3, 3], np.int64)),  # more than one element
    (3, np.array([[3]], np.int64)),  # rank 2
], ids=["int-as-float", "int32", "float-as-int", "two-elements", "rank-2"])
def test_a_python_number_in_another_layout_keeps_its_mismatch(number, onnx_value) -> None:
    assert as_exported("number", np.asarray(number), onnx_value) is None


def test_a_plain_tensor_is_never_relaid() -> None:
    value = np.zeros((3, 5), np.float32)
    assert as_exported("tensor", value, np.zeros((3, 5, 2), np.float32)) is None
    assert as_exported("tensor", np.asarray(2), np.asarray(2)) is None


def test_one_note_per_output_whatever_the_number_of_cuts() -> None:
    cut = (Relaid("z", "_fft_r2c", "complex", "complex64", "float32"),
           Relaid("count", "sym_size_int_1", "number", "int64", "int64"))
    notes = layout_notes([*cut, *cut, *cut])
    assert [n.details["output"] for n in notes] == ["z", "count"]
    assert all(n.code == "output-layout" for n in notes)
    assert 'ONNX output "_fft_r2c" holds it as float32 with a last axis of 2' in notes[0].message
    assert 'output "count" is a Python int in PyTorch' in notes[1].message
    assert "Fix:" not in notes[0].message + notes[1].message


# -- through the command line, on a fresh repository ------------------------------------------

MODELS = '''\
import torch
from torch import nn


class Spectrum(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x)


class Numbers(nn.Module):
    def forward(self, x):
        return x.sum(), x.argmax(-1), x.shape[0]

'''
MODEL = '''
[[model]]
name = "{name}"
factory = "models.kinds:{factory}"
inputs = {{ x = "samples/x.npy" }}
dynamic-axes = {{ x = {{ 0 = "batch" }} }}
{extra}'''
CONFIG = "batch-sizes = [1, 3]\n" + "".join(MODEL.format(name=n, factory=f, extra=e) for n, f, e in [
    ("spectrum", "Spectrum", 'exporter = "dynamo"\nvariants = ["fp16", "int8-dynamic"]\n'),
    ("numbers", "Numbers", 'exporter = "dynamo"\noutputs = ["total", "best", "count"]\n'),
    ("numbers-ts", "Numbers", 'exporter = "torchscript"\n'),
    ("tight", "Spectrum", 'exporter = "dynamo"\natol = 1e-9\nrtol = 0\n'),
])


@pytest.fixture(scope="module")
def kinds_run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    repo = tmp_path_factory.mktemp("kinds")
    (repo / "models").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "kinds.py").write_text(MODELS, encoding="utf-8")
    (repo / "samples").mkdir()
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    np.save(repo / "samples" / "x.npy", x)
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    return run_cli("check", "--jobs", "1", cwd=repo, out=repo / "out")


def findings(run: CliRun, model: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for finding in run.models()[model]["findings"]:
        found.setdefault(finding["code"], []).append(finding)
    return found


def rows(run: CliRun, model: str, output: str) -> list[dict]:
    return [row for row in run.models()[model]["comparisons"] if row["output"] == output]


@pytest.mark.slow
def test_a_complex_output_passes_compared_as_real_pairs_with_its_note(kinds_run: CliRun) -> None:
    model = kinds_run.models()["spectrum"]
    assert model["passed"], model["findings"]
    [note] = findings(kinds_run, "spectrum")["output-layout"]
    assert note["severity"] == "note"
    assert note["message"].startswith('output "output" is a complex64 tensor in PyTorch')
    assert "`torch.view_as_real`" in note["message"]
    for row in rows(kinds_run, "spectrum", "output"):
        assert row["torch_shape"] == row["onnx_shape"] == [row["batch_size"], 9, 2]
        assert 0 < row["max_abs_diff"] < 1e-5  # the DFT's own rounding, measured as for floats
    assert "output-layout(note)" in kinds_run.stdout


@pytest.mark.slow
def test_variants_of_a_complex_output_get_their_figures(kinds_run: CliRun) -> None:
    variants = kinds_run.models()["spectrum"]["variants"]
    assert [v["name"] for v in variants] == ["fp16", "int8-dynamic"]
    for variant in variants:
        assert variant["skipped"] is None
        assert all(c["sqnr_db"] > 30 for c in variant["comparisons"])  # compared, not skipped


@pytest.mark.slow
@pytest.mark.parametrize(("model", "output", "onnx_output"), [
    ("numbers", "count", "count"),  # dynamo keeps x.shape[0] (sym_size_int_1), named by `outputs`
    ("numbers-ts", "2", "5"),  # TorchScript keeps it too, as a traced size
])
def test_a_returned_python_number_is_compared_as_a_0d_value(kinds_run: CliRun, model: str,
                                                            output: str, onnx_output: str) -> None:
    result = kinds_run.models()[model]
    assert result["passed"], result["findings"]
    assert "shape-mismatch" not in findings(kinds_run, model)
    [note] = findings(kinds_run, model)["output-layout"]
    assert note["message"].startswith(f'output "{output}" is a Python int in PyTorch; the ONNX '
                                      f'output "{onnx_output}" holds it in a one-element tensor')
    counted = rows(kinds_run, model, output)
    assert [(r["batch_size"], r["torch_shape"], r["onnx_dtype"]) for r in counted] == [
        (1, [], "int64"), (3, [], "int64")]
    assert all(r["passed"] for r in counted)
    names = [r["output"] for r in result["comparisons"] if r["batch_size"] == 1]
    assert names == (["total", "best", "count"] if model == "numbers" else ["0", "1", "2"])


@pytest.mark.slow
def test_a_complex_output_that_really_differs_still_fails(kinds_run: CliRun) -> None:
    """onnxruntime's DFT and PyTorch's FFT differ by about 1e-6 (deterministically, so not
    nondeterministic-model): far outside atol 1e-9, compared as (real, imaginary) pairs."""
    found = findings(kinds_run, "tight")
    assert not kinds_run.models()["tight"]["passed"]
    [mismatch] = found["parity-mismatch"]
    assert mismatch["message"].startswith('output "output" at batch')
    assert "shape-mismatch" not in found
    assert "dtype-mismatch" not in found
    assert "nondeterministic-model" not in found
    assert mismatch["details"]["first_divergence"]["op"] == "aten._fft_r2c.default"
    assert kinds_run.code == 1
