"""Every declared shape runs, inputs bind the way torch.onnx.export users expect, and drift
onnxruntime's optimizer introduces is told apart: tiny real models through real torch and
onnxruntime."""

from __future__ import annotations

import pytest

from onnx_parity.findings import Severity

SERIES = '{ x = "samples/series.npy" }'


def config(name: str, factory: str, inputs: str = SERIES, axes: str = '{ 0 = "batch", 1 = "time" }',
           extra: str = "") -> str:
    return (f'batch-sizes = [1, 3]\n[[model]]\nname = "{name}"\nfactory = "models.shapes:{factory}"\n'
            f"inputs = {inputs}\ndynamic-axes = {{ x = {axes} }}\n{extra}")


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def one(result, code):
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, [(f.code, f.message) for f in result.findings]
    return found[0]


def test_recurrent_loop_traced_by_torchscript_is_frozen_on_its_time_axis(check_model):
    result = check_model(config("loop", "RecurrentLoop", extra='exporter = "torchscript"\n'))
    finding = one(result, "frozen-dimension")
    assert finding.message.startswith('"x" axis 1 ("time") is declared dynamic, but onnxruntime '
                                      "fails at time 4 (passed at 8; exported at 8)")
    assert finding.details["failed_size"] == 4
    assert finding.details["passed_sizes"] == [8]
    assert "Gather" in finding.message  # onnxruntime's own evidence: the unrolled index
    assert result.axis_sizes == {"x": {1: (8, 4)}}
    assert result.dimension_sizes == {"time": (8, 4)}
    assert not result.passed


def test_position_embedding_sliced_by_length_passes_at_both_lengths(check_model):
    result = check_model(config("positions", "PositionEmbedding"))
    assert result.passed, [(f.code, f.message) for f in result.findings]
    ran = {(c.batch_size, c.input_shapes["x"]) for c in result.comparisons}
    assert ran == {(1, (1, 8, 6)), (3, (3, 8, 6)), (1, (1, 4, 6))}
    assert result.dimension_sizes == {"time": (8, 4)}


def test_axis_sizes_choose_the_lengths(check_model):
    result = check_model(config("positions-sized", "PositionEmbedding",
                                extra="axis-sizes = { x = { 1 = [2, 6] } }\n"))
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.axis_sizes == {"x": {1: (8, 2, 6)}}


def test_a_length_pytorch_cannot_run_is_noted_not_blamed_on_the_export(check_model):
    result = check_model(config("fixed", "FixedLength"))
    note = one(result, "shape-not-checked")
    assert note.severity == Severity.NOTE
    assert result.passed
    assert 'was not checked at time 4: PyTorch itself cannot run the model at that size' in note.message
    assert "axis-sizes = { x = { 1 = [8, ...] } }" in note.suggested_fix
    assert "frozen-dimension" not in codes(result)


def test_a_length_longer_than_the_samples_is_noted(check_model):
    result = check_model(config("too-long", "PositionEmbedding",
                                extra="axis-sizes = { x = { 1 = [4, 32] } }\n"))
    note = one(result, "shape-not-checked")
    assert "was not checked at time 32: the committed samples are 8 long" in note.message
    assert result.passed
    assert result.axis_sizes == {"x": {1: (8, 4)}}


def test_sequential_binds_x_by_position_with_a_note(check_model):
    text = ('batch-sizes = [1, 3]\n[[model]]\nname = "seq"\nfactory = "models.shapes:sequential"\n'
            'inputs = { x = "samples/x.npy" }\ndynamic-axes = { x = { 0 = "batch" } }\n')
    result = check_model(text)
    assert result.passed, [(f.code, f.message) for f in result.findings]
    note = one(result, "positional-binding")
    assert '"x" -> input' in note.message
    assert note.severity == Severity.NOTE
    import onnx
    model = onnx.load(result.onnx_path)
    assert [i.name for i in model.graph.input] == ["x"]


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_mask_behind_a_defaulted_parameter_binds_by_keyword(check_model, exporter):
    text = ('batch-sizes = [1, 3]\n[[model]]\nname = "lm"\nfactory = "models.shapes:TinyLanguageModel"\n'
            'inputs = { ids = "samples/ids.npy", mask = "samples/mask.npy" }\n'
            f'exporter = "{exporter}"\n'
            'dynamic-axes = { ids = { 0 = "batch", 1 = "sequence" }, mask = { 0 = "batch", 1 = "sequence" } }\n')
    result = check_model(text)
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.dimension_sizes == {"sequence": (6, 3)}
    assert result.axis_sizes == {"ids": {1: (6, 3)}, "mask": {1: (6, 3)}}


def test_optimizer_drift_when_outputs_match_with_optimizations_disabled(check_model):
    text = ('batch-sizes = [1, 3]\natol = 0.0\nrtol = 0.0\n[[model]]\nname = "recip"\n'
            'factory = "models.shapes:ReciprocalTimes"\ninputs = { x = "samples/x.npy" }\n'
            'dynamic-axes = { x = { 0 = "batch" } }\n')
    result = check_model(text)
    drift = one(result, "optimizer-drift")
    assert "parity-mismatch" not in codes(result)
    assert drift.details["highest_passing_level"] == "disabled"
    assert drift.details["disabled_max_abs_diff"] == 0.0
    assert drift.details["max_abs_diff"] > 0
    assert "GraphOptimizationLevel.ORT_DISABLE_ALL" in drift.suggested_fix
    assert result.runtime_optimization == "all"


def test_the_same_model_passes_when_checked_as_deployed_without_optimizations(check_model):
    text = ('batch-sizes = [1, 3]\natol = 0.0\nrtol = 0.0\nruntime-optimization = "disabled"\n'
            '[[model]]\nname = "recip-off"\nfactory = "models.shapes:ReciprocalTimes"\n'
            'inputs = { x = "samples/x.npy" }\ndynamic-axes = { x = { 0 = "batch" } }\n')
    result = check_model(text)
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.runtime_optimization == "disabled"


def test_a_dynamic_axis_committed_at_length_1_is_exported_from_2(check_model, model_repo):
    import numpy as np
    import onnx

    series = np.load(model_repo / "samples" / "series.npy")
    np.save(model_repo / "samples" / "one-step.npy", series[:, :1])
    result = check_model(config("one-step", "PositionEmbedding", '{ x = "samples/one-step.npy" }'))
    dims = [d.dim_param or d.dim_value
            for d in onnx.load(result.onnx_path).graph.input[0].type.tensor_type.shape.dim]
    assert dims[1] == "time"  # symbolic: not fixed at the committed 1
    assert result.passed
    assert "frozen-dimension" not in codes(result)
    note = one(result, "shape-not-checked")
    assert "was not checked at time 2: the committed samples are 1 long" in note.message
