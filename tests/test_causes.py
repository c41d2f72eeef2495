"""Every failure named at its cause (issue 22 §2), through the real CLI on models written here:
a TracerWarning of a tensor turned into a Python value explains the mismatch it causes, a
Python loop the TorchScript trace unrolled is named at its `for` line (and a constant that only
equals the export length by chance is not blamed), and a fix recommends no exporter that
failed for the model."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, line_of, run_cli

MODELS = '''
import torch


class Scaled(torch.nn.Module):
    """Multiplies by the largest magnitude of the batch, read as a Python int."""

    def forward(self, x):
        scale = int(x.abs().max())  # the trace keeps the export batch's value
        return x * scale


class Stepper(torch.nn.Module):
    """A GRU cell stepped over time in Python; its hidden size equals the time length."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = x.new_zeros(x.shape[0], 16)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outs.append(self.out(h))
        return torch.stack(outs, 1)


class Scanned(torch.nn.Module):
    """A scan whose loop dynamo cannot export over a dynamic length (a data-dependent
    branch inside), so the fallback TorchScript traces it."""

    def forward(self, x):
        if x.sum() > 0:
            return x.cumsum(1)
        return x * 0


def scaled():
    return Scaled().eval()


def stepper():
    torch.manual_seed(0)
    return Stepper().eval()
'''


def write_repo(root: Path, config: str, samples: dict[str, np.ndarray]) -> Path:
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "causes.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    for name, array in samples.items():
        np.save(repo / "samples" / f"{name}.npy", array)
    (repo / "onnx-parity.toml").write_text(textwrap.dedent(config), encoding="utf-8")
    return repo


def findings(run: CliRun, name: str) -> list[dict]:
    return run.models()[name]["findings"]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliRun]:
    root = tmp_path_factory.mktemp("scaled")
    rng = np.random.default_rng(0)
    # Each sample a different magnitude: the batch that runs after the export batch is larger.
    x = (rng.standard_normal((4, 8)) * np.arange(1, 5)[:, None] * 3).astype(np.float32)
    repo = write_repo(root, '''
        batch-sizes = [2]
        [[model]]
        name = "scaled"
        factory = "models.causes:scaled"
        exporter = "torchscript"
        inputs = { x = "samples/x.npy" }
        dynamic-axes = { x = { 0 = "batch" } }
        ''', {"x": x})
    run = run_cli("check", cwd=repo, out=root / "out")
    assert run.code == 1, run.stdout + run.stderr
    return repo, run


@pytest.mark.slow
def test_a_mismatch_follows_from_the_int_of_a_tensor_at_its_line(scaled) -> None:
    repo, run = scaled
    line = line_of(repo / "models" / "causes.py", "scale = int(")
    every = findings(run, "scaled")
    [mismatch] = [f for f in every if f["code"] == "parity-mismatch"]
    assert mismatch["details"]["explained_by"] == "tracer-warning"
    assert f"The mismatch follows from the values the TorchScript trace kept constant at " \
           f"models/causes.py:{line}" in mismatch["fix"]
    assert "smallest passing atol" not in mismatch["message"]  # no tolerance fixes it
    [warning] = [f for f in every if f["code"] == "tracer-warning"]
    assert (warning["file"], warning["line"], warning["severity"]) == (
        "models/causes.py", line, "error")
    assert warning["details"]["python_value"] is True


@pytest.fixture(scope="module")
def stepper(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliRun]:
    root = tmp_path_factory.mktemp("stepper")
    rng = np.random.default_rng(0)
    repo = write_repo(root, '''
        batch-sizes = [2]
        [[model]]
        name = "stepper"
        factory = "models.causes:stepper"
        exporter = "torchscript"
        inputs = { x = "samples/x.npy" }
        dynamic-axes = { x = { 0 = "batch", 1 = "time" } }
        ''', {"x": rng.standard_normal((2, 16, 4)).astype(np.float32)})
    run = run_cli("check", cwd=repo, out=root / "out")
    assert run.code == 1, run.stdout + run.stderr
    return repo, run


@pytest.mark.slow
def test_an_unrolled_loop_is_named_at_its_for_line(stepper) -> None:
    repo, run = stepper
    model = run.models()["stepper"]
    assert not model["passed"]
    [finding] = [f for f in model["findings"] if f["code"] == "shape-assumption"]
    assert finding["severity"] == "error"
    assert (finding["file"], finding["line"]) == (
        "models/causes.py", line_of(repo / "models" / "causes.py", "for t in range(x.shape[1])"))
    assert "unrolled the loop at models/causes.py:" in finding["message"]
    assert "into 16 steps: 16 Gather nodes" in finding["message"]
    assert "the constant indices 0..15 along axis 1" in finding["message"]
    assert finding["details"]["condition"] == "time must be 16"
    assert finding["details"]["failed_sizes"] == [
        n for n in model["lengths"]["time"]["run"] if n != 16]
    # The hidden size 16 in `x.new_zeros(x.shape[0], 16)` stays 16 at another length: no blame.
    assert "ConstantOfShape" not in finding["message"]
    assert not [f for f in model["findings"] if "ConstantOfShape" in f["message"]]
    assert not [f for f in model["findings"] if f["code"] == "length-mismatch"]
    # The shipped model carries no source lines: only the trace read for them did.
    import onnx

    shipped = onnx.load(str(run.out / "stepper.onnx"), load_external_data=False)
    assert not any(node.doc_string for node in shipped.graph.node)
