"""One finding per cause, one fix per finding (issue 16 §2).

A finding's message says what failed and where; what the user does is its fix field only, and
the report prints it once. A model that fails the same way at every batch size gets one
finding listing the batches, not one per batch with the fixes of each.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, copy_repo, run_cli, write_bad_files
from onnx_parity.findings import CATALOGUE, Finding
from onnx_parity.verification.outputs import count_mismatch
from onnx_parity.verification.repeats import merge_repeats, merge_texts

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "seed-failures"
# Failing fixture models of configs/bad-inputs.toml, one of each kind of message: the factory,
# the weights, the samples, the binding of inputs to forward, PyTorch failing on the samples.
BAD_MODELS = ("module-missing", "attribute-missing", "factory-raises", "not-a-module",
              "weights-mismatch", "weights-missing", "weights-malicious", "sample-missing",
              "sample-objects", "sample-empty", "input-not-taken", "input-not-given",
              "axis-beyond-rank", "forward-raises")

BAKED = '''import torch
from torch import nn


class Baked(nn.Module):
    """The batch read as a Python number: the trace keeps the export batch's size."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 10)

    def forward(self, x):
        return torch.ones(int(x.shape[0]), 10) * self.fc(x).mean()


class ViewOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 10)

    def forward(self, x):
        return self.fc(x.view(1, -1)[:, :12])
'''

REPEATING = '''batch-sizes = [1, 2, 3, 4]

[[model]]
name = "baked"
factory = "models.baked:Baked"
exporter = "torchscript"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "view-one"
factory = "models.baked:ViewOne"
inputs = { x = "samples/x.npy" }
'''


def assert_one_fix_each(done: CliRun) -> int:
    """Every finding of the run: no fix inside its message, exactly one fix (its own or the
    catalogue's), and the markdown report prints that fix once and nothing of a second."""
    count = 0
    for model in done.models().values():
        for finding in model["findings"]:
            where = (model["name"], finding["code"], finding["message"])
            assert "Fix:" not in finding["message"], where
            assert finding["fix"], where
            assert "Fix:" not in finding["fix"], where
            count += 1
    markdown = (done.folder / "report.md").read_text(encoding="utf-8")
    for line in markdown.splitlines():
        assert line.count("Fix:") <= 1, line
        if line.startswith("- ") and "`" in line:  # a finding's line: what and where only
            assert "Fix:" not in line, line
    return count


@pytest.mark.slow
def test_the_example_and_failing_fixture_models_give_each_finding_one_fix(
        tmp_path: Path) -> None:
    example = tmp_path / "seed-failures"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__"))
    done = run_cli("check", "--repo", str(example), "--jobs", "2", cwd=tmp_path,
                   out=tmp_path / "example-out")
    assert done.code == 1, done.stderr
    assert assert_one_fix_each(done) >= 6

    repo = copy_repo(tmp_path / "repo")
    markers = tmp_path / "markers"
    markers.mkdir()
    write_bad_files(repo, markers)
    selected = [arg for name in BAD_MODELS for arg in ("--model", name)]
    bad = run_cli("check", "--config", "configs/bad-inputs.toml", "--jobs", "2", *selected,
                  cwd=repo, out=tmp_path / "bad-out")
    assert bad.code == 1, bad.stderr
    assert sorted(bad.models()) == sorted(BAD_MODELS)
    assert assert_one_fix_each(bad) >= len(BAD_MODELS)
    own = [f for m in bad.models().values() for f in m["findings"] if f["code"] == "load-error"]
    assert all(f["fix"] != CATALOGUE["load-error"].fix for f in own), \
        "each load error knows its cause: its fix is its own, not the catalogue's"


@pytest.mark.slow
def test_a_model_failing_the_same_way_at_every_batch_gets_one_finding_listing_them(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "baked.py").write_text(BAKED, encoding="utf-8")
    (repo / "onnx-parity.toml").write_text(REPEATING, encoding="utf-8")
    x = np.random.default_rng(0).standard_normal((8, 12)).astype(np.float32)
    np.save(repo / "samples" / "x.npy", x)
    done = run_cli("check", "--jobs", "2", cwd=repo, out=tmp_path / "out")
    assert done.code == 1, done.stderr
    models = done.models()

    [shape] = [f for f in models["baked"]["findings"] if f["code"] == "shape-mismatch"]
    # traced at batch 2, the output keeps 2 rows: wrong at every other batch size, said once
    assert shape["message"] == ('output "output": PyTorch [B, 10], onnxruntime [2, 10] at '
                                "batches 1, 3, 4 (B: the batch size)")
    assert shape["details"]["batches"] == [1, 3, 4]
    assert "fixes axis 0 of this output at 2" in shape["fix"]  # the cause, not the catalogue's

    [frozen] = [f for f in models["view-one"]["findings"] if f["code"] == "frozen-dimension"]
    assert frozen["message"].count("onnxruntime fails at") == 1, frozen["message"]
    assert "onnxruntime fails at batches 2, 3, 4 (exported from batch 1)" in frozen["message"]
    assert "Got: 2/3/4 Expected: 1" in frozen["message"]  # each batch's own figure kept
    assert frozen["details"]["batches"] == [2, 3, 4]
    assert 'Declare it in `dynamic-axes` (`x = { 0 = "batch" }`)' in frozen["fix"]
    assert_one_fix_each(done)


def test_repeats_of_one_finding_per_cut_and_batch_merge_into_one_listing_the_batches() -> None:
    names = ("output", "sym_size_int_1")
    repeats = [count_mismatch(size, 1, names) for size in (1, 1, 4, 4, 8)]
    other = Finding("training-mode", "factory returned the model in training mode")
    [merged, kept] = merge_repeats([*repeats, other])
    assert repeats[0].message.startswith("at batch 1 PyTorch returned 1 ")
    assert merged.message == repeats[0].message.replace("at batch 1 ", "at batches 1, 4, 8 ")
    assert merged.details == {"batches": [1, 4, 8]}
    assert merged.fix == repeats[0].fix
    assert kept is other


def test_texts_that_differ_in_more_than_their_size_stay_apart() -> None:
    assert merge_texts([(2, "fails at batch 2: Got: 2"), (3, "fails at batch 3: Got: 3")]) == \
        "fails at batches 2, 3: Got: 2/3"
    assert merge_texts([(2, "fails at batch 2: a Gemm"), (3, "fails at batch 3: a Conv")]) is None
    assert merge_texts([(2, "max abs diff 0.5"), (3, "max abs diff 0.7")]) is None  # no size
