"""A failing model's repro folder: the diverging subgraph, its inputs, PyTorch's values, repro.py
and REPORT.md, written through the real CLI; repro.py run where torch, onnx and onnx_parity
cannot be imported reproduces the figure the report gives."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import copy_repo, line_of, run_cli, write_samples
from onnx_parity.verification.localisation.repro import subgraph_inputs
from onnx_parity.verification.onnx_values import Graph, GraphNode

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "seed-failures"
# Runs a script with every import of torch, onnx and onnx_parity failing: what a colleague's
# environment with only numpy and onnxruntime has.
BLOCKED = """
import runpy, sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "onnx", "onnx_parity", "onnxscript"):
            raise ImportError(f"{name} is not installed here")
sys.meta_path.insert(0, Blocked())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
PRINTED = re.compile(r"max abs diff ([0-9.e+-]+)")


def run_repro(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """repro.py in a fresh isolated interpreter (-I: no user site, no PYTHONPATH, so neither
    the repository nor onnx-parity is importable), from another folder than its own."""
    return subprocess.run([sys.executable, "-I", "-c", BLOCKED, str(script)], cwd=cwd,
                          text=True, capture_output=True, timeout=120, check=False)


def printed_diff(output: str) -> float:
    found = PRINTED.search(output)
    assert found, output
    return float(found.group(1))


@pytest.mark.slow
def test_the_examples_localised_failure_reproduces_without_torch(tmp_path: Path) -> None:
    repo = tmp_path / "seed-failures"
    shutil.copytree(EXAMPLE, repo)
    run = run_cli("check", "--repo", str(repo), "--model", "spectral-head", "--jobs", "1",
                  cwd=tmp_path, out=tmp_path / "out")
    assert run.code == 1, run.stderr
    folder = run.folder / "spectral-head.repro"
    assert sorted(p.name for p in folder.iterdir()) == [
        "REPORT.md", "expected.npz", "inputs.npz", "repro.py", "subgraph.onnx"]
    model = run.models()["spectral-head"]
    first = next(f for f in model["findings"]
                 if f["code"] == "parity-mismatch")["details"]["first_divergence"]
    repro = model["repro"]
    assert (repro["file"], repro["line"], repro["op"]) == (first["file"], first["line"],
                                                           first["op"])
    assert repro["found_by"] == "localisation"
    assert repro["folder"] == "spectral-head.repro"
    assert repro["reproduces"] is True
    assert repro["inputs"] == ["conv1d"]  # the compared value the FFT is computed from

    done = run_repro(folder / "repro.py", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    printed = printed_diff(done.stdout)
    assert printed == pytest.approx(first["max_abs_diff"], rel=0.01)
    assert "tolerance 2e-07 + 0 * |expected|" in done.stdout
    assert len((folder / "repro.py").read_text(encoding="utf-8").splitlines()) <= 40

    report = (folder / "REPORT.md").read_text(encoding="utf-8")
    assert report.startswith("# onnxruntime differs from PyTorch at `aten._fft_r2c` "
                             "(`models/spectral.py:22`)")
    for fact in ("| torch | 2.13", "| onnxruntime |", "| onnxscript |", "| onnx |",
                 "| python |", "| platform |", "dynamo, opset 18",
                 "python spectral-head.repro/repro.py", f"{first['max_abs_diff']:.2e}"):
        assert fact in report
    comment = (run.folder / "report.md").read_text(encoding="utf-8")
    assert "**Repro:** `spectral-head.repro/` holds `subgraph.onnx`" in comment
    assert "python spectral-head.repro/repro.py" in comment
    assert str(tmp_path) not in (folder / "subgraph.onnx").read_bytes().decode("latin-1")


@pytest.mark.slow
def test_a_torchscript_folder_names_the_forward_of_the_module_it_was_localised_to(
        tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    write_samples(repo)
    (repo / "onnx-parity.toml").write_text(
        'batch-sizes = [1, 3]\n[[model]]\nname = "third-ts"\n'
        'factory = "models.drift:ThirdBlockDrift"\ninputs = { x = "samples/x.npy" }\n'
        'dynamic-axes = { x = { 0 = "batch" } }\natol = 0.0\nrtol = 0.0\n'
        'exporter = "torchscript"\n', encoding="utf-8")
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stderr
    forward = line_of(repo / "models" / "drift.py", "class Smooth") + 1  # Smooth.forward
    repro = run.models()["third-ts"]["repro"]
    assert (repro["file"], repro["line"]) == ("models/drift.py", forward)
    report = (run.folder / "third-ts.repro" / "REPORT.md").read_text(encoding="utf-8")
    assert report.splitlines()[0].endswith(f"(`models/drift.py:{forward}`): max abs diff "
                                           f"{repro['max_abs_diff']:.2e}")
    assert f"The user's code of these nodes: `models/drift.py:{forward}`." in report
    assert "torchscript, opset" in report


def spectral(extra: str) -> str:
    return ('batch-sizes = [4]\n[[model]]\nname = "spectral"\n'
            'factory = "models.drift:SpectralHead"\ninputs = { x = "samples/series.npy" }\n'
            'dynamic-axes = { x = { 0 = "batch" } }\natol = 5e-7\nrtol = 0.0\n' + extra)


@pytest.mark.slow
def test_a_folder_past_repro_max_mb_is_cut_to_one_sample_then_left_out(check_model) -> None:
    whole = check_model(spectral("")).repro
    assert whole is not None
    assert (whole.samples, whole.batch_size, whole.omitted) == (4, 4, None)
    assert whole.size_bytes < whole.limit_bytes == 4 << 20

    limit_mb = (whole.size_bytes - 1) / (1 << 20)
    cut = check_model(spectral(f"repro-max-mb = {limit_mb!r}\n")).repro
    assert cut is not None
    assert (cut.samples, cut.omitted) == (1, None)
    assert cut.size_bytes <= cut.limit_bytes
    expected = np.load(Path(cut.folder) / "expected.npz")["arr_0"]
    assert expected.shape[0] == 1

    none = check_model(spectral("repro-max-mb = 0.0001\n")).repro
    assert none is not None
    assert none.omitted is not None
    assert "too large to include: over repro-max-mb = 0.0001" in none.omitted
    assert sorted(p.name for p in Path(none.folder).iterdir()) == []  # REPORT.md comes later


def test_the_subgraph_starts_at_the_compared_values_and_the_graph_inputs_it_reaches() -> None:
    # x -> a -> b -> c, and c also reads x directly: cut at a, the subgraph takes a and x.
    nodes = (GraphNode("na", "Op", ("x", "w"), ("a",), None, None),
             GraphNode("nb", "Op", ("a",), ("b",), None, None),
             GraphNode("nc", "Op", ("b", "x", "w"), ("c",), None, None))
    graph = Graph(nodes, inputs=("x",), outputs=("c",), constants=frozenset({"w"}))
    assert subgraph_inputs(graph, "c", frozenset({"a"})) == (("x", "a"), frozenset({1, 2}))
    assert subgraph_inputs(graph, "a", frozenset()) == (("x",), frozenset({0}))
