"""The call contract (issue 21 §1, §2): linked lengths (`"past + 1"`) and inputs whose batch is
not on axis 0 or absent (`batch-axis`), through the real CLI on repositories the tests write,
with real torch, onnxruntime and segment-anything."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import copy_repo, run_cli
from onnx_parity.models.contract import CallContract
from onnx_parity.settings import Linear, parse_dimension
from onnx_parity.settings.loading import load_settings
from onnx_parity.settings.values import ConfigError

STEP = """batch-sizes = [1, 3]
[[model]]
name = "step"
factory = "models.calls:step"
inputs = { x = "samples/x.npy", attention_mask = "samples/mask.npy", past = "samples/past.npy" }
outputs = ["out", "present"]
dynamic-axes = { x = { 0 = "batch" }, attention_mask = { 0 = "batch", 1 = "MASK" }, past = { 0 = "batch", 1 = "past" }, out = { 0 = "batch" }, present = { 0 = "batch", 1 = "past + 1" } }
"""


def step_repo(tmp_path: Path, mask_label: str, mask_length: int = 7) -> Path:
    repo = copy_repo(tmp_path / "repo")
    rng = np.random.default_rng(0)
    samples = repo / "samples"
    samples.mkdir()
    np.save(samples / "x.npy", rng.standard_normal((4, 1, 8)).astype(np.float32))
    np.save(samples / "past.npy", rng.standard_normal((4, 6, 8)).astype(np.float32))
    mask = np.ones((4, mask_length), np.int64)
    mask[1, :2] = 0  # a left-padded row
    np.save(samples / "mask.npy", mask)
    (repo / "onnx-parity.toml").write_text(STEP.replace("MASK", mask_label), encoding="utf-8")
    return repo


def model_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))["models"][0]


# --- the expressions --------------------------------------------------------------------------

@pytest.mark.parametrize(("label", "expected"), [
    ("past + 1", Linear("past", 1, 1)), ("total - 1", Linear("total", 1, -1)),
    ("2 * frames", Linear("frames", 2, 0)), ("2 * frames + 1", Linear("frames", 2, 1)),
    ("seq-len", None), ("past", None),
])
def test_a_label_is_a_name_or_a_linear_expression_of_one(label: str, expected: Linear | None) -> None:
    parsed = parse_dimension(label)
    assert parsed == expected
    if parsed is not None:
        assert str(parsed) == label
        assert parsed.root_length(parsed.length(7)) == 7


def test_the_smallest_root_keeps_every_derived_axis_at_least_one_long() -> None:
    assert Linear("past", 1, 1).smallest_root() == 0  # an empty cache, a mask of 1
    assert Linear("total", 1, -1).smallest_root() == 2
    assert Linear("frames", 2, 0).smallest_root() == 1


CONFIG_ERRORS = [
    ('dynamic-axes = { x = { 0 = "batch", 1 = "past +1" } }', 'key "dynamic-axes.x.1": "past +1" is neither a dimension name'),
    ('dynamic-axes = { x = { 1 = "past + 1" } }', '"past + 1" derives from "past", which no input declares as a dimension'),
    ('dynamic-axes = { x = { 1 = "frames" }, y = { 1 = "2 * frame" } }', 'did you mean "frames"?'),
    ('dynamic-axes = { x = { 1 = "frames" }, y = { 1 = "frames + 1" } }\naxis-sizes = { y = { 1 = [3, 5] } }',
     'axis 1 is "frames + 1", derived from "frames": its lengths follow the root\'s'),
    ('batch-axis = { x = "first" }', 'key "batch-axis.x": "first" is not an axis'),
    ('batch-axis = { x = -1 }', 'key "batch-axis.x": -1 is not an axis'),
    ('batch-axis = { x = 1 }\ndynamic-axes = { x = { 1 = "batch", 2 = "time" } }\naxis-sizes = { x = { 1 = [2, 3] } }',
     'axis 1 is the batch axis of "x", which `batch-sizes` sets'),
]


@pytest.mark.parametrize(("lines", "expected"), CONFIG_ERRORS)
def test_a_malformed_contract_is_refused_naming_the_key_and_the_fix(tmp_path: Path, lines: str,
                                                                    expected: str) -> None:
    (tmp_path / "onnx-parity.toml").write_text(
        '[[model]]\nname = "m"\nfactory = "models.m:build"\n'
        'inputs = { x = "samples/x.npy", y = "samples/y.npy" }\n' + lines + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    assert expected in str(raised.value)
    assert 'model "m"' in str(raised.value) or "[[model]]" in str(raised.value)


def test_batch_axis_none_is_read_as_no_batch(tmp_path: Path) -> None:
    (tmp_path / "onnx-parity.toml").write_text(
        '[[model]]\nname = "m"\nfactory = "models.m:build"\ninputs = { x = "samples/x.npy" }\n'
        'batch-axis = { x = 1, size = "none" }\n', encoding="utf-8")
    assert load_settings(tmp_path).models[0].batch_axis == {"x": 1, "size": None}


# --- batches in the deployed layout -----------------------------------------------------------

def test_a_batch_is_stacked_at_the_batch_axis_or_is_the_first_sample_alone() -> None:
    samples = np.arange(4 * 5 * 3).reshape(4, 5, 3)  # 4 samples of (time 5, features 3)
    contract = CallContract({"x": 1, "size": None})
    cut = contract.cut("x", samples, 3, 2)  # samples 3 and 0 (wrapping)
    assert cut.shape == (5, 2, 3)
    np.testing.assert_array_equal(cut[:, 0], samples[3])
    np.testing.assert_array_equal(cut[:, 1], samples[0])
    np.testing.assert_array_equal(contract.cut("size", samples, 2, 3), samples[2])
    assert contract.cut("other", samples, 0, 2).shape == (2, 5, 3)
    assert [contract.sample_axis("x", axis) for axis in range(3)] == [1, 0, 2]
    assert [contract.sample_axis("size", axis) for axis in range(2)] == [1, 2]


def test_model_zoo_tensors_are_laid_out_as_samples_by_their_batch_axis() -> None:
    """A Model Zoo dataset holds deployed tensors: joined at the batch axis, or one sample each."""
    contract = CallContract({"x": 1, "size": None})
    first, second = np.zeros((5, 2, 3)), np.ones((5, 1, 3))  # (time, batch, features)
    joined = contract.samples_of([first, second], "x")
    assert joined.shape == (3, 5, 3)
    np.testing.assert_array_equal(joined[2], np.ones((5, 3)))
    sizes = contract.samples_of([np.array([48, 64]), np.array([32, 32])], "size")
    np.testing.assert_array_equal(sizes, [[48, 64], [32, 32]])


# --- through the CLI --------------------------------------------------------------------------

@pytest.mark.slow
def test_a_mask_one_longer_than_the_cache_is_swept_with_it(tmp_path: Path) -> None:
    """`past + 1` runs the mask at every past length's own length and names the link."""
    repo = step_repo(tmp_path, "past + 1")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr
    model = model_of(tmp_path / "out")
    assert model["dimension_sizes"] == {"past": [6, 3, 5, 8, 1]}
    assert model["axis_sizes"]["attention_mask"] == {"1": [7, 4, 6, 9, 2]}
    assert model["linked_axes"] == {"past": ["attention_mask axis 1 = past + 1",
                                             "present axis 1 = past + 1"]}
    assert model["findings"] == []  # the derived axis's own guard is no assumption
    shapes = {(c["input_shapes"]["past"][1], c["input_shapes"]["attention_mask"][1])
              for c in model["comparisons"]}
    assert shapes == {(6, 7), (3, 4), (5, 6), (8, 9), (1, 2)}
    assert "past 6, 3, 5, 8, 1 (attention_mask axis 1 = past + 1; present axis 1 = past + 1)" in \
        (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    import onnx

    graph = onnx.load(str(tmp_path / "out" / "step.onnx")).graph
    mask = next(i for i in graph.input if i.name == "attention_mask")
    assert [d.dim_param for d in mask.type.tensor_type.shape.dim] == ["batch", "past + 1"]


@pytest.mark.slow
def test_the_mask_under_a_name_of_its_own_is_swept_apart_from_the_cache(tmp_path: Path) -> None:
    """What the expression fixes: two names vary one at a time, feeding lengths no deployment
    sends, which PyTorch itself cannot run."""
    repo = step_repo(tmp_path, "total")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    model = model_of(tmp_path / "out")
    assert model["lengths"]["past"]["skipped"], run.stdout
    assert model["lengths"]["total"]["skipped"], run.stdout
    codes = {f["code"] for f in model["findings"]}
    assert "shape-not-checked" in codes
    # dynamo records the link the names hide as an assumption the file does not check
    assumed = [f["message"] for f in model["findings"] if f["code"] == "shape-assumption"]
    assert any("== 1 + past" in message or "past + 1" in message for message in assumed), assumed


def test_samples_that_contradict_the_expression_are_a_load_error(tmp_path: Path) -> None:
    repo = step_repo(tmp_path, "past + 1", mask_length=9)
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    model = model_of(tmp_path / "out")
    assert run.code == 1
    [finding] = model["findings"]
    assert finding["code"] == "load-error"
    assert ('input "attention_mask" axis 1 is declared "past + 1", so at past 6 (the committed '
            "samples) it must be 7 long, but its samples hold 9") in finding["message"]


def test_a_batch_axis_naming_nothing_the_graph_has_is_a_finding(tmp_path: Path) -> None:
    repo = step_repo(tmp_path, "past + 1")
    config = repo / "onnx-parity.toml"
    config.write_text(config.read_text(encoding="utf-8") + 'batch-axis = { presnt = 0 }\n',
                      encoding="utf-8")
    run_cli("check", cwd=repo, out=tmp_path / "out")
    messages = [f["message"] for f in model_of(tmp_path / "out")["findings"]]
    assert any('`batch-axis` names "presnt", but the exported model has inputs' in m
               for m in messages), messages


@pytest.mark.slow
def test_a_time_major_gru_takes_its_batch_on_axis_1(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    (repo / "samples").mkdir()
    np.save(repo / "samples" / "series.npy",
            np.random.default_rng(0).standard_normal((4, 8, 6)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(
        'batch-sizes = [1, 3]\n[[model]]\nname = "gru"\nfactory = "models.calls:time_major"\n'
        'exporter = "torchscript"\ninputs = { x = "samples/series.npy" }\noutputs = ["out"]\n'
        'batch-axis = { x = 1, out = 1 }\n'
        'dynamic-axes = { x = { 0 = "time", 1 = "batch" }, out = { 0 = "time", 1 = "batch" } }\n',
        encoding="utf-8")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr
    model = model_of(tmp_path / "out")
    shapes = {(c["batch_size"], tuple(c["input_shapes"]["x"])) for c in model["comparisons"]}
    assert shapes == {(batch, (time, batch, 6)) for batch in (1, 3) for time in (8, 4, 7, 10, 1)}
    assert {tuple(c["torch_shape"]) for c in model["comparisons"] if c["batch_size"] == 3} == \
        {(time, 3, 16) for time in (8, 4, 7, 10, 1)}


@pytest.mark.slow
def test_segment_anythings_decoder_takes_its_image_size_unbatched(tmp_path: Path) -> None:
    """SamOnnxModel as its own export script declares it: orig_im_size (2,), has_mask_input (1,)."""
    repo = copy_repo(tmp_path / "repo")
    samples = repo / "samples"
    samples.mkdir()
    rng = np.random.default_rng(0)
    np.save(samples / "emb.npy", rng.standard_normal((2, 32, 16, 16)).astype(np.float32))
    np.save(samples / "coords.npy", rng.uniform(0, 64, (2, 3, 2)).astype(np.float32))
    np.save(samples / "labels.npy", np.array([[1, 0, -1], [1, 1, -1]], np.float32))
    np.save(samples / "mask_input.npy", np.zeros((2, 1, 64, 64), np.float32))
    np.save(samples / "has_mask.npy", np.zeros((2, 1), np.float32))
    np.save(samples / "size.npy", np.array([[48, 64], [48, 64]], np.float32))
    (repo / "onnx-parity.toml").write_text(
        'batch-sizes = [1]\n[[model]]\nname = "sam-decoder"\n'
        'factory = "models.calls:sam_decoder"\n'
        'inputs = { image_embeddings = "samples/emb.npy", point_coords = "samples/coords.npy", '
        'point_labels = "samples/labels.npy", mask_input = "samples/mask_input.npy", '
        'has_mask_input = "samples/has_mask.npy", orig_im_size = "samples/size.npy" }\n'
        'batch-axis = { orig_im_size = "none", has_mask_input = "none" }\n'
        'dynamic-axes = { point_coords = { 1 = "num_points" }, point_labels = { 1 = "num_points" } }\n',
        encoding="utf-8")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr
    import onnx

    graph = onnx.load(str(tmp_path / "out" / "sam-decoder.onnx")).graph
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in graph.input}
    assert dims["orig_im_size"] == [2]
    assert dims["has_mask_input"] == [1]
    assert dims["point_coords"] == [1, "num_points", 2]
    model = model_of(tmp_path / "out")
    assert {tuple(c["input_shapes"]["orig_im_size"]) for c in model["comparisons"]} == {(2,)}
    assert model["max_abs_diff"] < 1e-4
