"""When per-node localisation cannot say, the failing model is reduced by bisection over its
graph's order: through the real CLI on a deep MLP with a drift planted in one block, the
reduction finds the place localisation finds (within a few nodes) and its repro folder
reproduces it without torch."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_repo.harness import copy_repo, run_cli, write_samples
from onnx_parity.verification.localisation.reduce import _bisect
from test_repro import printed_diff, run_repro

DEEP = ('batch-sizes = [1, 3]\n[[model]]\nname = "deep"\nfactory = "models.deep_drift:DeepDrift"\n'
        'inputs = { x = "samples/x.npy" }\ndynamic-axes = { x = { 0 = "batch" } }\n'
        'atol = 1e-5\nrtol = 0.0\n')


def check(tmp_path: Path, name: str, extra: str) -> tuple[dict, Path]:
    repo = tmp_path / "repo"
    if not repo.exists():
        copy_repo(repo)
        write_samples(repo)
    (repo / f"{name}.toml").write_text(DEEP + extra, encoding="utf-8")
    run = run_cli("check", "--repo", str(repo), "--config", str(repo / f"{name}.toml"),
                  "--jobs", "1", cwd=tmp_path, out=tmp_path / name)
    assert run.code == 1, run.stderr
    return run.models()["deep"], run.folder


def graph_order(onnx_file: Path) -> list[str]:
    import onnx

    graph = onnx.load(str(onnx_file), load_external_data=False).graph
    return [value for node in graph.node for value in node.output]


@pytest.mark.slow
def test_over_the_localisation_limit_the_bisection_finds_the_same_place(tmp_path: Path) -> None:
    localised, _ = check(tmp_path, "localised", "")
    first = next(f for f in localised["findings"]
                 if f["code"] == "parity-mismatch")["details"]["first_divergence"]
    assert localised["repro"]["found_by"] == "localisation"

    model, out = check(tmp_path, "reduced", "localise-max-values = 10\n")
    finding = next(f for f in model["findings"] if f["code"] == "parity-mismatch")
    assert "over localise-max-values = 10" in finding["message"]
    assert "Reduced by bisection over the graph's order" in finding["message"]
    reduction = finding["details"]["reduction"]
    assert reduction["found_by"] == "bisection"
    assert reduction["level"] == "all"
    assert 1 < reduction["prefixes_run"] <= 8  # about log2 of the candidates, not all of them
    order = graph_order(out / "deep.onnx")
    assert 0 <= order.index(reduction["value"]) - order.index(first["node"]) <= 3
    assert (finding["file"], finding["line"]) == (reduction["file"], reduction["line"])
    assert reduction["file"] == "models/deep_drift.py"
    assert model["divergence"]["nodes"] == []  # nothing was marked all at once

    repro = model["repro"]
    assert (repro["found_by"], repro["optimization"], repro["reproduces"]) == (
        "bisection", "all", True)
    assert repro["value"] == reduction["value"]
    assert repro["nodes"] <= 4
    done = run_repro(out / "deep.repro" / "repro.py", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert printed_diff(done.stdout) == pytest.approx(reduction["max_abs_diff"], rel=0.01)
    report = (out / "deep.repro" / "REPORT.md").read_text(encoding="utf-8")
    assert "bisection over the graph's order" in report
    assert "ORT_ENABLE_ALL" in report


def test_the_bisection_finds_the_earliest_failing_prefix_in_log_runs() -> None:
    asked: list[str] = []

    def fails(value: str) -> bool:
        asked.append(value)
        return int(value) >= 37

    values = [str(n) for n in range(100)]
    assert _bisect(values, fails) == ("36", "37")
    assert len(asked) <= 8
    assert _bisect(values, lambda _value: True) == (None, "0")
    assert _bisect(values, lambda _value: False) is None
    assert _bisect([], fails) is None
