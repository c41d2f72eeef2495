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

from fixture_repo.harness import CliRun, line_of, run_cli, write_model_repo

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


class Chunks(torch.nn.Module):
    """Sums chunks of 4 along time, their count read as a Python int, after a branch on
    values: dynamo refuses the branch, so the fallback TorchScript traces it."""

    def forward(self, x):
        if x.mean() > -10:  # dynamo refuses a branch on values
            x = x + 1
        n = int(x.shape[1]) // 4  # the trace keeps the export length's count
        return x.reshape(x.shape[0], n, 4 * x.shape[2]).sum(-1)


def scaled():
    return Scaled().eval()


def chunks():
    return Chunks().eval()


def stepper():
    torch.manual_seed(0)
    return Stepper().eval()
'''


def test_the_users_lines_come_first_and_an_explained_away_warning_explains_nothing() -> None:
    from onnx_parity.findings import Finding, Severity
    from onnx_parity.verification.tracer_causes import explained_fix, promoted, value_warnings

    package = Finding("tracer-warning", "TracerWarning at segment_anything/utils/onnx.py:85 (an "
                      "installed package): Converting a tensor to a Python integer might ...",
                      severity=Severity.WARNING, details={"python_value": True})
    own = Finding("tracer-warning", "TracerWarning at models/m.py:12: Converting ...",
                  file="models/m.py", line=12, details={"python_value": True})
    allowed = Finding("tracer-warning", "TracerWarning at models/m.py:30: Converting ...",
                      file="models/m.py", line=30, allowed_by="constant in deployment",
                      details={"python_value": True})
    length = Finding("tracer-warning", "TracerWarning at models/m.py:40: Iterating over a "
                     "tensor might cause the trace to be incorrect.", file="models/m.py", line=40)
    export = [package, allowed, length, own]
    assert value_warnings(export) == [own, package]
    assert "kept constant at models/m.py:12, segment_anything/utils/onnx.py:85 (" in \
        explained_fix(value_warnings(export), "The mismatch")
    mismatch = Finding("parity-mismatch", "output", details={"explained_by": "tracer-warning"})
    [(old, new)] = promoted(export, [mismatch])
    assert (old, new.severity) == (package, Severity.ERROR)
    assert promoted(export, [Finding("parity-mismatch", "output")]) == []


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory):
    """The GRU stepper written into a repository, traced at time 16 (shipped: no source lines)
    and at time 8 with its nodes' source lines, as the export stage does."""
    import importlib.util
    import warnings

    import torch

    root = tmp_path_factory.mktemp("traced")
    (root / "models").mkdir()
    (root / "models" / "causes.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("causes_models", root / "models" / "causes.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.stepper()
    for length, verbose in ((16, False), (8, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's DeprecationWarning
            torch.onnx.export(model, (torch.randn(2, length, 4),),
                              str(root / f"t{length}.onnx"), dynamo=False, input_names=["x"],
                              dynamic_axes={"x": {0: "batch", 1: "time"}}, verbose=verbose)
    return root


def test_the_loop_is_the_run_of_indices_that_follows_the_length(traced: Path) -> None:
    from onnx_parity.export.unrolled import Retrace, unrolled_loops

    retrace = Retrace("time", 16, 8, traced / "t8.onnx")
    [loop] = unrolled_loops(traced / "t16.onnx", (retrace,), traced)
    assert (loop.dimension, loop.steps, loop.op, loop.axis) == ("time", 16, "Gather", 1)
    assert (loop.file, loop.line) == (
        "models/causes.py", line_of(traced / "models" / "causes.py", "for t in range("))
    assert (loop.first, loop.last) == ("/Gather_1", "/Gather_16")
    # Traced at the export length again, nothing follows the length: no loop.
    assert unrolled_loops(traced / "t16.onnx", (Retrace("time", 16, 16, traced / "t16.onnx"),),
                          traced) == ()


def test_a_constant_that_keeps_its_value_at_another_length_is_no_evidence(traced: Path) -> None:
    from onnx_parity.export.constant_shapes import constant_shape_evidence
    from onnx_parity.export.unrolled import Retrace, moving

    [hidden] = constant_shape_evidence(traced / "t16.onnx", {"time": 16})
    assert (hidden.op, hidden.values) == ("ConstantOfShape", (16,))  # x.new_zeros(b, 16)
    assert moving((hidden,), (Retrace("time", 16, 8, traced / "t8.onnx"),)) == ()
    assert moving((hidden,), ()) == (hidden,)  # no second trace: kept, as before


def write_repo(root: Path, config: str, samples: dict[str, np.ndarray]) -> Path:
    return write_model_repo(root, ("causes", MODELS), samples, textwrap.dedent(config))


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
    assert sorted(finding["details"]["failed_sizes"]) == sorted(
        n for n in model["lengths"]["time"]["run"] if n != 16)
    # The hidden size 16 in `x.new_zeros(x.shape[0], 16)` stays 16 at another length: no blame.
    assert "ConstantOfShape" not in finding["message"]
    assert not [f for f in model["findings"] if "ConstantOfShape" in f["message"]]
    assert not [f for f in model["findings"] if f["code"] == "length-mismatch"]
    # The shipped model carries no source lines: only the trace read for them did.
    import onnx

    shipped = onnx.load(str(run.out / "stepper.onnx"), load_external_data=False)
    assert not any(node.doc_string for node in shipped.graph.node)


@pytest.mark.slow
def test_no_fix_recommends_the_exporter_that_failed_for_the_model(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    repo = write_repo(tmp_path, '''
        batch-sizes = [2]
        [[model]]
        name = "chunks"
        factory = "models.causes:chunks"
        inputs = { x = "samples/x.npy" }
        dynamic-axes = { x = { 0 = "batch", 1 = "time" } }
        ''', {"x": rng.standard_normal((2, 16, 4)).astype(np.float32)})
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    model = run.models()["chunks"]
    assert [(a["exporter"], a["succeeded"]) for a in model["attempts"]] == [
        ("dynamo", False), ("torchscript", True)]
    failing = [f for f in model["findings"] if f["severity"] == "error"
               and f["code"] in ("shape-assumption", "length-mismatch")]
    assert failing, model["findings"]
    # The failing lengths follow from the int() the trace kept: the fix names that line.
    line = line_of(repo / "models" / "causes.py", "n = int(x.shape[1])")
    assert f"models/causes.py:{line}" in failing[0]["fix"]
    assert failing[0]["details"]["explained_by"] == "tracer-warning"
    fixes = [f["fix"] or "" for f in model["findings"]]
    assert not [fix for fix in fixes if 'exporter = "dynamo"' in fix], fixes
