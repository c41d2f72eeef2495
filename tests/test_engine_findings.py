"""Every finding code, each produced by a tiny real model through real torch and onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import numpy_helper

from onnx_parity.findings import Severity

TINY = Path(__file__).parent / "fixture_repo" / "models" / "tiny.py"


def line_of(text: str) -> int:
    """The line of the user's code a finding must point at, found in the source itself."""
    lines = TINY.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def one(result, code):
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, [f.code for f in result.findings]
    return found[0]


def model(name, factory, inputs='{ x = "samples/x.npy" }', dynamic=True, extra=""):
    axes = 'dynamic-axes = { x = { 0 = "batch" } }\n' if dynamic else ""
    return (f'batch-sizes = [1, 3]\n[[model]]\nname = "{name}"\nfactory = "models.tiny:{factory}"\n'
            f"inputs = {inputs}\n{axes}{extra}")


def test_linear_passes_at_batch_1_and_3_with_diff_below_1e_6(check_model):
    result = check_model(model("linear", "Linear"))
    assert result.passed, result.findings
    assert result.exporter == "dynamo"
    assert result.opset == 18
    assert {c.batch_size for c in result.comparisons} == {1, 3}
    assert 0 <= result.max_abs_diff < 1e-6


def test_parity_mismatch_at_zero_tolerance_reports_figures(check_model):
    result = check_model(model("strict", "Spectrum", extra="atol = 0.0\nrtol = 0.0\n"))
    finding = one(result, "parity-mismatch")
    assert finding.severity == Severity.ERROR
    worst = max(result.comparisons, key=lambda c: c.max_abs_diff)
    assert worst.max_abs_diff > 0
    assert worst.mismatched > 0
    assert worst.smallest_passing_atol == pytest.approx(worst.max_abs_diff)
    assert "smallest passing atol" in finding.message
    assert "max abs diff" in finding.message


def test_a_localisation_that_cannot_run_the_model_again_keeps_the_verdict(check_model):
    """Localising comes after the verdict: the model's code failing when run again for its
    intermediate values (here a module refusing forward hooks) is the reason no node is
    named, and the mismatch with its figures stays."""
    result = check_model(model("hook-shy", "HookShy",
                               extra='exporter = "torchscript"\natol = 0.0\nrtol = 0.0\n'))
    finding = one(result, "parity-mismatch")
    assert "max abs diff" in finding.message
    assert result.comparisons
    assert max(c.max_abs_diff for c in result.comparisons) > 0
    assert result.divergence is not None
    assert result.divergence.unlocalised == (
        "running PyTorch again for the intermediate values raised RuntimeError: "
        "HookShy runs without forward hooks")


def test_frozen_dimension_without_dynamic_axes(check_model):
    result = check_model(model("frozen", "Linear", dynamic=False))
    finding = one(result, "frozen-dimension")
    assert "static at 1" in finding.message
    assert "batch 3" in finding.message
    assert "Got invalid dimensions" in finding.message  # onnxruntime's own words


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_frozen_dimension_from_hard_coded_view_with_pytorch_error(check_model, exporter):
    result = check_model(model("view", "Flatten1", extra=f'exporter = "{exporter}"\n'))
    finding = one(result, "frozen-dimension")
    assert "cannot run the model at batch 2" in finding.message
    assert "mat1 and mat2 shapes cannot be multiplied" in finding.message
    assert not result.passed


def test_data_dependent_branch_dynamo_refusal_then_fallback_mismatch(check_model):
    result = check_model(model("branchy", "Branchy", inputs='{ x = "samples/mixed.npy" }'))
    branch = one(result, "data-dependent-branch")
    assert (branch.file, branch.line) == ("models/tiny.py", line_of("if x.mean() > 0:"))
    assert "GuardOnDataDependentSymNode" in branch.message
    assert result.exporter == "torchscript"
    assert "exporter-fallback" in codes(result, Severity.NOTE)
    assert "parity-mismatch" in codes(result, Severity.ERROR)  # negative samples: -103 vs -6


def test_data_dependent_branch_from_tracer_warning_at_user_line(check_model):
    result = check_model(model("sqrt", "SqrtIfPositive", inputs='{ x = "samples/positive.npy" }',
                               extra='exporter = "torchscript"\n'))
    branch = one(result, "data-dependent-branch")
    assert (branch.file, branch.line) == ("models/tiny.py", line_of("if x.min() > 0:"))
    assert "Python boolean" in branch.message
    assert not result.passed


def test_allow_warnings_keeps_the_branch_as_a_note_with_reason(check_model):
    extra = ('exporter = "torchscript"\n[[model.allow-warnings]]\n'
             'match = "Converting a tensor to a Python boolean"\nreason = "inputs are positive"\n')
    result = check_model(model("sqrt-ok", "SqrtIfPositive",
                               inputs='{ x = "samples/positive.npy" }', extra=extra))
    branch = one(result, "data-dependent-branch")
    assert branch.severity == Severity.NOTE
    assert branch.allowed_by == "inputs are positive"
    assert result.passed


def test_nan_or_inf_where_pytorch_is_finite(check_model):
    result = check_model(model("sqrt-mixed", "SqrtIfPositive", inputs='{ x = "samples/mixed.npy" }',
                               extra='exporter = "torchscript"\n'))
    finding = one(result, "nan-or-inf")
    assert finding.severity == Severity.ERROR
    assert "batch 3" in finding.message


def test_tracer_warning_for_python_float(check_model):
    result = check_model(model("scale", "ScaleByMax", extra='exporter = "torchscript"\n'))
    finding = one(result, "tracer-warning")
    assert (finding.file, finding.line) == ("models/tiny.py", line_of("float(x.abs().max())"))
    assert "Python float" in finding.message


def test_unsupported_operator_named_and_not_handled(check_model):
    result = check_model(model("rfft-ts", "Spectrum", extra='exporter = "torchscript"\n'))
    finding = one(result, "unsupported-operator")
    assert finding.details["operator"] == "aten::fft_rfft"
    assert finding.details["handled"] is False
    assert (finding.file, finding.line) == ("models/tiny.py", line_of("torch.fft.rfft(x).abs()"))
    assert finding.severity == Severity.ERROR
    assert result.exporter is None


def test_exporter_fallback_handles_the_unsupported_operator(check_model):
    result = check_model(model("rfft-fallback", "Spectrum",
                               extra='exporter = ["torchscript", "dynamo"]\n'))
    assert result.passed
    assert result.exporter == "dynamo"
    assert one(result, "unsupported-operator").severity == Severity.NOTE
    fallback = one(result, "exporter-fallback")
    assert "torchscript failed" in fallback.message
    assert [a.exporter for a in result.attempts] == ["torchscript", "dynamo"]
    assert 0 < result.max_abs_diff < 1e-4


def test_opset_mismatch_when_dynamo_raises_13_to_18(check_model):
    result = check_model(model("rfft13", "Spectrum", extra="opset = 13\n"))
    finding = one(result, "opset-mismatch")
    assert finding.details == {"requested": 13, "actual": 18}


def test_onnx_checker_rejects_dynamo_opset_17_reduce_l2(check_model):
    result = check_model(model("rfft17", "Spectrum", extra="opset = 17\n"))
    assert "noop_with_empty_axes" in one(result, "onnx-checker").message
    assert "runtime-error" in codes(result)


def test_shape_mismatch_when_the_tracer_bakes_len_of_the_batch(check_model):
    result = check_model(model("ones", "OnesOfLength", extra='exporter = "torchscript"\n'))
    assert "PyTorch [B, 2], onnxruntime [2, 2]" in one(result, "shape-mismatch").message


def test_dtype_mismatch_when_torchscript_keeps_int32_where_pytorch_promotes(check_model):
    result = check_model(model("cumsum", "IntRunningSum", extra='exporter = "torchscript"\n'))
    assert "PyTorch int64, onnxruntime int32" in one(result, "dtype-mismatch").message


def test_complex_output_is_compared_as_real_pairs_with_a_note(check_model):
    result = check_model(model("complex", "ComplexSpectrum"))
    assert result.passed, result.findings
    assert "view_as_real" in one(result, "output-layout").message


def test_training_mode_note_and_eval_semantics(check_model):
    result = check_model(model("dropout", "training_dropout"))
    note = one(result, "training-mode")
    assert note.severity == Severity.NOTE
    assert "Dropout" in note.message
    assert result.passed  # eval() was applied: no random dropout in either side


def test_golden_mismatch_and_runtime_error_from_model_zoo_folder(check_model, model_repo):
    zoo = model_repo / "zoo"
    x = np.load(model_repo / "samples" / "x.npy")[:2]
    for index, golden in enumerate([x[:1] * 2, x[1:2] * 2 + 0.5]):
        folder = zoo / f"test_data_set_{index}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x[index:index + 1]).SerializeToString())
        (folder / "output_0.pb").write_bytes(numpy_helper.from_array(golden).SerializeToString())
    result = check_model(model("zoo", "Double", inputs='"zoo"'))
    finding = one(result, "golden-mismatch")
    assert "test_data_set_1" in finding.message
    assert "test_data_set_0" not in finding.message


def test_load_error_names_the_missing_attribute(check_model):
    result = check_model(model("missing", "Linaer"))
    finding = one(result, "load-error")
    assert 'Did you mean "Linear"' in finding.message


def test_export_error_when_every_exporter_fails(check_model):
    result = check_model(model("boxed", "Boxed"))
    errors = [f for f in result.findings if f.code == "export-error"]
    assert [e.message.split()[0] for e in errors] == ["dynamo", "torchscript"]
    assert "Box" in errors[0].message


def test_runtime_error_when_pytorch_rejects_the_samples(check_model):
    result = check_model(model("dtype", "TwoInputs", dynamic=False,
                               inputs='{ ids = "samples/x.npy", mask = "samples/mask.npy" }'))
    assert not result.passed
    assert set(codes(result)) & {"export-error", "runtime-error"}
