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


def test_recurrent_loop_traced_by_torchscript_fails_at_other_lengths(check_model):
    """The graph keeps `time` symbolic but unrolls the loop for 8 steps: the failing lengths are
    named at the loop's line (a trace at another length shows the run of Gathers move), not a
    frozen-dimension (the file does not fix the axis) nor a bare length-mismatch."""
    result = check_model(config("loop", "RecurrentLoop", extra='exporter = "torchscript"\n'))
    [loop] = [f for f in result.findings if f.code == "shape-assumption"]
    assert (loop.severity, loop.file, loop.line) == (Severity.ERROR, "models/shapes.py", 16)
    assert loop.message.startswith(
        "the TorchScript export unrolled the loop at models/shapes.py:16 over time into 8 "
        "steps: 8 Gather nodes (/Gather_1 ... /Gather_8) read the constant indices 0..7 along "
        "axis 1; the ONNX file computes those 8 steps at every length, and the model fails at "
        "time ")
    assert sorted(loop.details["failed_sizes"]) == [1, 4, 7, 10]
    assert "length-mismatch" not in codes(result)  # the loop explains every failing length
    assert "frozen-dimension" not in codes(result)
    assert result.axis_sizes == {"x": {1: (8, 4, 7, 10, 1)}}
    assert result.dimension_sizes == {"time": (8, 4, 7, 10, 1)}
    assert not result.passed


def test_position_embedding_sliced_by_length_passes_at_every_length(check_model):
    result = check_model(config("positions", "PositionEmbedding"))
    assert result.passed, [(f.code, f.message) for f in result.findings]
    ran = {(c.batch_size, c.input_shapes["x"]) for c in result.comparisons}
    # L, L // 2, an odd length near 3L/4, one near 5L/4: at the smallest and largest batch;
    # then the far side of the table's bound (time <= 16) the export assumed: 16 runs, 17 and
    # on are PyTorch's own limit.
    assert ran == {(batch, (batch, length, 6)) for batch in (1, 3)
                   for length in (8, 4, 7, 10, 1, 16)}
    assert result.dimension_sizes == {"time": (8, 4, 7, 10, 1, 16)}
    assert result.lengths["time"].run == (8, 4, 7, 10, 1, 16)
    assert list(result.lengths["time"].skipped) == [17, 20, 22]


def test_axis_sizes_choose_the_lengths(check_model):
    result = check_model(config("positions-sized", "PositionEmbedding",
                                extra="axis-sizes = { x = { 1 = [2, 6] } }\n"))
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.axis_sizes == {"x": {1: (8, 2, 6, 16)}}  # and the far side of time <= 16


def test_a_length_pytorch_cannot_run_is_noted_not_blamed_on_the_export(check_model):
    result = check_model(config("fixed", "FixedLength"))
    note = one(result, "shape-not-checked")
    assert note.severity == Severity.NOTE
    assert result.passed
    assert ('was not checked at time 4, 7, 10: PyTorch itself cannot run the model at that size '
            "(RuntimeError: The size of tensor a (4/7/10) must match") in note.message
    assert "axis-sizes = { x = { 1 = [8, ...] } }" in note.suggested_fix
    assert "frozen-dimension" not in codes(result)
    assert result.lengths["time"].run == (8, 1)  # a table of 8 rows broadcasts over 1
    skipped = result.lengths["time"].skipped
    assert list(skipped) == [4, 7, 10]
    assert skipped[7].startswith("PyTorch itself fails: RuntimeError: The size of tensor a (7)")


def test_a_length_longer_than_the_samples_repeats_them(check_model):
    result = check_model(config("longer", "PositionEmbedding",
                                extra="axis-sizes = { x = { 1 = [4, 13] } }\n"))
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.axis_sizes == {"x": {1: (8, 4, 13, 16)}}
    assert (1, (1, 13, 6)) in {(c.batch_size, c.input_shapes["x"]) for c in result.comparisons}


def test_a_length_past_a_position_table_is_skipped_with_pytorchs_error(check_model):
    result = check_model(config("too-long", "PositionEmbedding",
                                extra="axis-sizes = { x = { 1 = [4, 32] } }\n"))
    note = one(result, "shape-not-checked")
    assert "was not checked at time 32: PyTorch itself cannot run the model" in note.message
    assert result.passed
    assert result.axis_sizes == {"x": {1: (8, 4)}}
    assert list(result.lengths["time"].skipped) == [32]


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
    assert result.dimension_sizes == {"sequence": (6, 3, 5, 8, 1)}
    assert result.axis_sizes == {"ids": {1: (6, 3, 5, 8, 1)}, "mask": {1: (6, 3, 5, 8, 1)}}


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
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert "frozen-dimension" not in codes(result)
    assert "shape-not-checked" not in codes(result)  # longer lengths repeat the one step
    assert result.dimension_sizes == {"time": (1, 2, 3, 4)}
