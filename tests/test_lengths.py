"""Every length that breaks: each declared axis other than the batch runs at its committed
length L, L // 2, an odd length near 3L/4 and one near 5L/4, built by repeating the committed
samples, at the smallest and the largest batch size; through the real CLI on real torch and
onnxruntime (a transformers Swin from a small config, padded attention, a convolution)."""

from __future__ import annotations

import numpy as np
import pytest

from fixture_repo.harness import CliRun, copy_repo, run_cli, write_samples
from onnx_parity.models.shapes import Dimension, default_sizes, resize

CONFIG = """batch-sizes = [1, 3]

# TorchScript (dynamo refuses this Swin): the window partition's padding is baked for 64.
[[model]]
name = "swin"
factory = "models.lengths:tiny_swin"
exporter = "torchscript"
batch-sizes = [1, 2]
inputs = { pixel_values = "samples/images.npy" }
dynamic-axes = { pixel_values = { 0 = "batch", 2 = "height", 3 = "width" } }

# transformers 5 installs output-capturing hooks on its first forward (issue 27 §1).
[[model]]
name = "segformer"
factory = "models.lengths:tiny_segformer"
batch-sizes = [1, 2]
inputs = { pixel_values = "samples/images.npy" }
dynamic-axes = { pixel_values = { 0 = "batch", 2 = "height", 3 = "width" } }

[[model]]
name = "padded-torchscript"
factory = "models.lengths:PaddedAttention"
exporter = "torchscript"
inputs = { x = "samples/steps.npy" }
dynamic-axes = { x = { 0 = "batch", 1 = "time" } }
allow-warnings = [{ match = "Converting a tensor to a Python boolean", reason = "the length test" }]

[[model]]
name = "padded-dynamo"
factory = "models.lengths:PaddedAttention"
exporter = "dynamo"
inputs = { x = "samples/steps.npy" }
dynamic-axes = { x = { 0 = "batch", 1 = "time" } }

[[model]]
name = "smoothing"
factory = "models.lengths:Smoothing"
inputs = { x = "samples/steps.npy" }
dynamic-axes = { x = { 0 = "batch", 1 = "time" } }

[[model]]
name = "fixed"
factory = "models.shapes:FixedLength"
inputs = { x = "samples/series.npy" }
dynamic-axes = { x = { 0 = "batch", 1 = "time" } }
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("lengths")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "images.npy", rng.standard_normal((2, 3, 64, 64)).astype(np.float32))
    np.save(repo / "samples" / "steps.npy", rng.standard_normal((4, 16, 6)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    done = run_cli("check", "--jobs", "2", cwd=repo, out=root / "out")
    assert done.code == 1, done.stderr  # the Swin and the padded models fail
    return done


def errors(model: dict, *codes: str) -> list[dict]:
    return [f for f in model["findings"] if f["severity"] == "error" and f["code"] in codes]


def test_default_sizes_keep_no_divisibility_of_the_committed_length() -> None:
    assert default_sizes(64) == (64, 32, 49, 80, 1)
    assert default_sizes(16) == (16, 8, 13, 20, 1)
    for length in range(1, 600):
        sizes = default_sizes(length)
        assert sizes[0] == length
        assert len(set(sizes)) == len(sizes) >= 3
        assert sizes[-1] == 1 or length == 1  # what deployments send most, tried last
        assert any(size % 2 for size in sizes[1:-1])  # an odd one: no power of two divides it
        assert max(sizes) > length  # a longer one
    assert 1 not in default_sizes(6, smallest=2)  # a root whose expression needs 2 or more


def test_other_lengths_repeat_the_samples_along_the_axis() -> None:
    ids = np.arange(2 * 3).reshape(2, 3)
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    sequence = Dimension("sequence", (("ids", 1), ("mask", 1)), 3, (3, 2, 7))
    longer = resize({"ids": ids, "mask": mask}, sequence, 7)
    assert longer["ids"].tolist() == [[0, 1, 2, 0, 1, 2, 0], [3, 4, 5, 3, 4, 5, 3]]
    assert longer["mask"].tolist() == [[1, 1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 0, 0, 1]]
    assert resize({"ids": ids, "mask": mask}, sequence, 2)["ids"].tolist() == [[0, 1], [3, 4]]


@pytest.mark.slow
def test_a_swin_traced_by_torchscript_fails_at_a_length_no_power_of_two_divides(sweep):
    swin = sweep.models()["swin"]
    assert not swin["passed"]
    # Length 1 is smaller than a window: PyTorch itself cannot run it, and since nobody asked
    # for it, it is skipped without a note (and the Swin's own change of its window size at that
    # run does not leak into the next one: width still runs at every other length).
    for axis in ("height", "width"):
        assert swin["lengths"][axis]["run"] == [64, 32, 49, 80]
        assert list(swin["lengths"][axis]["skipped"]) == ["1"]
    assert not [f for f in swin["findings"] if f["code"] == "shape-not-checked"]
    failing = errors(swin, "length-mismatch", "shape-assumption")
    assert failing, swin["findings"]
    lengths = {size for f in failing for size in f["details"].get("sizes", [])
               + f["details"].get("failed_sizes", []) + [f["details"].get("size", 0)]}
    assert 49 in lengths  # odd: the halved 32 keeps every multiple the windows need
    mismatch = next(f for f in failing if f["code"] == "length-mismatch")
    assert "Reshape" in mismatch["message"]  # onnxruntime's own words: the window partition
    assert "(batch 1, 2;" in mismatch["message"]  # the smallest and the largest batch size
    # The TracerWarnings inside transformers are quoted as the evidence of the failure,
    # file:line and text; those of a tensor turned into a Python value explain it (the fix
    # names them) and are errors.
    assert "transformers/models/swin/modeling_swin.py:" in mismatch["evidence"]
    assert "the export's TracerWarnings, each a value the trace kept constant: transformers/" \
        in mismatch["message"]
    assert mismatch["details"]["explained_by"] == "tracer-warning"
    assert "follows from the values the TorchScript trace kept constant at transformers/" \
        in mismatch["fix"]
    assert [f for f in swin["findings"] if f["severity"] == "error"
            and f["code"] in ("tracer-warning", "data-dependent-branch")
            and "transformers/models/swin/modeling_swin.py:" in f["message"]]


@pytest.mark.slow
def test_a_segformer_that_hooks_itself_on_its_first_call_passes_every_batch_and_length(sweep):
    """Its reference runs at batch 1 then 2 (and the exporters' traces) keep the hooks and the
    flag its first call installed: nothing is captured twice, nothing fails."""
    segformer = sweep.models()["segformer"]
    assert segformer["passed"], [(f["code"], f["message"]) for f in segformer["findings"]]
    assert segformer["exporter"] == "dynamo"
    shapes = {(c["batch_size"], tuple(c["input_shapes"]["pixel_values"]))
              for c in segformer["comparisons"]}
    assert {batch for batch, _ in shapes} == {1, 2}
    for axis in ("height", "width"):
        assert segformer["lengths"][axis]["run"] == [64, 32, 49, 80]
    assert (2, (2, 3, 49, 64)) in shapes
    assert (1, (1, 3, 64, 80)) in shapes
    assert segformer["max_abs_diff"] < 1e-4


@pytest.mark.slow
def test_attention_padded_to_a_multiple_of_8_fails_at_13_and_20_with_its_figures(sweep):
    for name in ("padded-torchscript", "padded-dynamo"):
        model = sweep.models()[name]
        assert not model["passed"], name
        assert model["lengths"]["time"]["run"] == [16, 8, 13, 20, 1]
        failing = errors(model, "length-mismatch", "shape-assumption")
        assert failing, (name, model["findings"])
        text = " ".join(f["message"] for f in failing)
        assert "time 13" in text, text
        assert "20" in text, text
        assert "max abs diff" in text, text
        assert not errors(model, "parity-mismatch")  # it explains the mismatch
    [mismatch] = errors(sweep.models()["padded-torchscript"], "length-mismatch")
    assert mismatch["message"].startswith(
        '"x" axis 1 ("time") is symbolic in the exported model, but the outputs differ at time '
        "13, 20, 1 (batch 1, 3; runs clean at 16, 8; exported at 16)")
    assert mismatch["details"]["sizes"] == [13, 20, 1]
    assert mismatch["details"]["passed_sizes"] == [16, 8]


@pytest.mark.slow
def test_a_model_right_at_every_length_passes_at_every_length_and_both_batches(sweep):
    model = sweep.models()["smoothing"]
    assert model["passed"], model["findings"]
    ran = {(c["batch_size"], c["dimensions"]["time"]) for c in model["comparisons"]}
    assert ran == {(batch, length) for batch in (1, 3) for length in (16, 8, 13, 20, 1)}
    assert model["lengths"] == {"time": {"run": [16, 8, 13, 20, 1], "skipped": {}}}


@pytest.mark.slow
def test_lengths_pytorch_cannot_run_are_skipped_and_listed_with_why(sweep):
    model = sweep.models()["fixed"]
    assert model["passed"], model["findings"]
    skipped = model["lengths"]["time"]["skipped"]
    assert list(skipped) == ["4", "7", "10"]
    assert "PyTorch itself fails" in skipped["4"]
    assert "(4)" in skipped["4"]
    report = (sweep.folder / "report.md").read_text(encoding="utf-8")
    assert "`fixed` skipped time 4, 7, 10: PyTorch itself fails" in report
    assert "committed samples repeated along the axis (wrapping around)" in report
    assert "time 16, 8, 13, 20" in report  # the lengths run, in the table's Shapes column


def test_a_mask_row_a_shorter_length_would_leave_all_zero_takes_its_last_elements() -> None:
    """Left padding: at length 1 the first position is padding; the row takes its last one."""
    ids = np.arange(12).reshape(2, 6)
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])  # left- and right-padded rows
    sequence = Dimension("sequence", (("ids", 1), ("mask", 1)), 6, (6, 1))
    one = resize({"ids": ids, "mask": mask}, sequence, 1)
    assert one["mask"].tolist() == [[1], [1]]
    assert one["ids"].tolist() == [[0], [6]]  # ids keep the first elements
    three = resize({"ids": ids, "mask": mask}, sequence, 3)
    assert three["mask"].tolist() == [[0, 0, 1], [1, 1, 1]]  # no row emptied: as committed
