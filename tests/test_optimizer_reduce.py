"""optimizer-drift reduced against the same prefix with graph optimizations disabled, through the
real CLI, on a drift only onnxruntime's optimizer causes: a dynamic fake quantisation whose
`x * (1 / scale)` onnxruntime's DivMulFusion rewrites as `x / scale` from "basic" on (one
rounding instead of two), so inputs on half steps round to the other side (measured: max abs
diff 0 at "disabled", one step of the scale at "basic", "extended" and "all"). The ops are IEEE
divisions, multiplications and round-half-even on both sides, so the figures are exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import copy_repo, run_cli
from test_repro import printed_diff, run_repro

CONFIG = ('batch-sizes = [1, 4]\n[[model]]\nname = "fake-quant"\n'
          'factory = "models.fake_quant:FakeQuant"\ninputs = { x = "samples/steps.npy" }\n'
          'dynamic-axes = { x = { 0 = "batch" } }\natol = 1e-3\nrtol = 0.0\n')


def half_steps(rows: int = 4, width: int = 64) -> np.ndarray:
    """Rows of values on half steps of their own int8 scale (amax / 127), amax first."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(rows):
        amax = np.float32(rng.uniform(0.5, 8.0))
        scale = np.float64(np.float32(amax / np.float32(127.0)))
        row = ((rng.integers(-126, 126, width) + 0.5) * scale).astype(np.float32)
        row[0] = amax
        out.append(row)
    return np.stack(out)


@pytest.mark.slow
def test_optimizer_drift_is_reduced_against_the_prefix_with_optimizations_disabled(
        tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    (repo / "samples").mkdir(exist_ok=True)
    np.save(repo / "samples" / "steps.npy", half_steps())
    (repo / "fq.toml").write_text(CONFIG, encoding="utf-8")
    run = run_cli("check", "--repo", str(repo), "--config", str(repo / "fq.toml"),
                  "--jobs", "1", cwd=tmp_path, out=tmp_path / "out")
    assert run.code == 1, run.stderr
    model = run.models()["fake-quant"]
    assert [f["code"] for f in model["findings"]] == ["optimizer-drift"]
    finding = model["findings"][0]
    assert finding["details"]["disabled_max_abs_diff"] <= 1e-5
    assert finding["details"]["max_abs_diff"] > 1e-2
    assert finding["details"]["highest_passing_level"] == "disabled"
    assert "each against the same prefix with graph optimizations disabled" in finding["message"]

    reduction = finding["details"]["reduction"]
    assert reduction["found_by"] == "optimizer-bisection"
    assert (reduction["op"], reduction["file"]) == ("aten.round.default", "models/fake_quant.py")
    assert reduction["level"] == "all"
    assert reduction["max_abs_diff"] == 1.0  # one step: round(x / s) against round(x * (1/s))
    assert (finding["file"], finding["line"]) == (reduction["file"], reduction["line"])
    source = (repo / "models" / "fake_quant.py").read_text(encoding="utf-8").splitlines()
    assert "torch.round(" in source[reduction["line"] - 1]

    repro = model["repro"]
    assert (repro["found_by"], repro["reference"], repro["optimization"]) == (
        "optimizer-bisection", "optimizations-disabled", "all")
    assert repro["value"] == reduction["value"]
    assert repro["inputs"] == ["x"]  # the whole failing prefix: the fused Div and Mul inside it
    assert repro["reproduces"] is True
    folder = run.folder / "fake-quant.repro"
    done = run_repro(folder / "repro.py", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert printed_diff(done.stdout) == pytest.approx(reduction["max_abs_diff"], rel=0.01)

    # The same subgraph with graph optimizations disabled matches: the drift is the optimizer's.
    script = (folder / "repro.py").read_text(encoding="utf-8")
    assert "GraphOptimizationLevel.ORT_ENABLE_ALL" in script
    (folder / "disabled.py").write_text(script.replace("ORT_ENABLE_ALL", "ORT_DISABLE_ALL"),
                                        encoding="utf-8")
    clean = run_repro(folder / "disabled.py", tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert printed_diff(clean.stdout) == 0.0

    report = (folder / "REPORT.md").read_text(encoding="utf-8")
    assert report.startswith("# onnxruntime's graph optimizations change the result of "
                             "`aten.round`")
    assert "with graph optimizations disabled" in report
