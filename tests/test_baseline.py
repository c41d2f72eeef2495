"""This run against the base branch's report, through the real CLI: the `vs base` column, new and
removed models, `drift-regression`, `fail-on regression`, and an unreadable baseline (exit 2).

The "base branch" is a real run of the fixture repository; the "pull request" then changes a
file its model reads (models/drifting.json: the FFT's input scale, so its onnxruntime-vs-PyTorch
difference grows about a hundredfold while it still passes), adds a model and removes one. The
runs share a result cache, so only what changed runs again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixture_repo.harness import CliRun, copy_repo, run_cli, write_samples

# The module's repository runs the base branch and the head through the command line.
pytestmark = pytest.mark.slow

BASE = """\
batch-sizes = [1, 2]

[[model]]
name = "drifting"
factory = "models.drifting:build"
inputs = { x = "samples/positive.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "stable"
factory = "models.good:Linear"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "broken"
factory = "models.tiny:Branchy"
exporter = "torchscript"
inputs = { x = "samples/mixed.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "retired"
factory = "models.good:Linear"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
"""


@dataclass(frozen=True)
class Repo:
    path: Path
    cache: Path
    base: Path  # the base branch's report.json

    def check(self, out: Path, *extra: str, config: str = "onnx-parity.toml") -> CliRun:
        return run_cli("check", "--config", config, "--cache", str(self.cache), "--jobs", "2",
                       *extra, cwd=self.path, out=out)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    root = tmp_path_factory.mktemp("baseline")
    path = copy_repo(root / "repo")
    write_samples(path)
    (path / "onnx-parity.toml").write_text(BASE, encoding="utf-8")
    (path / "models" / "drifting.json").write_text('{"scale": 0.01}', encoding="utf-8")
    base = run_cli("check", "--cache", str(root / "cache"), cwd=path, out=root / "base")
    assert base.code == 1, base.stderr  # `broken` fails on the base branch already
    # The pull request: the drifting model's scale grows, `retired` goes, `fresh` comes.
    (path / "models" / "drifting.json").write_text('{"scale": 1.0}', encoding="utf-8")
    pull = BASE.replace('name = "retired"', 'name = "fresh"')
    (path / "onnx-parity.toml").write_text(pull, encoding="utf-8")
    return Repo(path, root / "cache", root / "base" / "report.json")


def table_row(done: CliRun, name: str) -> list[str]:
    markdown = (done.folder / "report.md").read_text(encoding="utf-8")
    line = next(line for line in markdown.splitlines() if line.startswith("| ") and
                f"`{name}`" in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_vs_base_column_new_and_removed_models(repo: Repo, tmp_path: Path) -> None:
    done = repo.check(tmp_path / "out", "--baseline", str(repo.base))
    assert done.code == 1, done.stderr
    markdown = (done.folder / "report.md").read_text(encoding="utf-8")
    assert "| Findings | vs base |" in markdown
    base = {m["name"]: m for m in json.loads(repo.base.read_text(encoding="utf-8"))["models"]}
    models = done.models()
    before, now = base["drifting"]["max_abs_diff"], models["drifting"]["max_abs_diff"]
    assert 30 < now / before < 300  # the scale grew a hundredfold
    assert table_row(done, "drifting")[-1] == f"{before:.2g} -> {now:.2g} (x{now / before:.0f})"
    assert table_row(done, "broken")[-1] == "already failing on base"
    assert table_row(done, "fresh")[-1] == "new model"
    assert "Removed since the base: `retired`." in markdown
    assert "_Note: the baseline was made with another configuration; compared all the same._" \
        in markdown
    assert models["drifting"]["baseline"] == {"passed": True, "max_abs_diff": before,
                                              "error_codes": []}
    assert models["broken"]["baseline"]["error_codes"] == ["data-dependent-branch",
                                                         "parity-mismatch"]
    assert models["fresh"]["baseline"] is None
    assert done.report()["baseline"]["removed_models"] == ["retired"]


def test_drift_regression_warns_when_a_passing_models_diff_grows_past_the_ratio(
        repo: Repo, tmp_path: Path) -> None:
    done = repo.check(tmp_path / "out", "--baseline", str(repo.base))
    drifting = done.models()["drifting"]
    assert drifting["passed"] is True
    (finding,) = [f for f in drifting["findings"] if f["code"] == "drift-regression"]
    assert finding["severity"] == "warning"
    assert "more than drift-warning-ratio 10 allows" in finding["message"]
    assert "noise floor atol / 10 = 1e-06" in finding["message"]
    assert not any(f["code"] == "drift-regression" for f in done.models()["stable"]["findings"])
    assert repo.check(tmp_path / "warn", "--baseline", str(repo.base),
                      "--fail-on", "warning").code == 1
    # A ratio above the growth (about 90x) accepts it: the key is per model or top level.
    config = repo.path / "lenient.toml"
    config.write_text("drift-warning-ratio = 1000\n" + (repo.path / "onnx-parity.toml")
                      .read_text(encoding="utf-8"), encoding="utf-8")
    lenient = repo.check(tmp_path / "lenient", "--baseline", str(repo.base),
                         config="lenient.toml")
    assert not any(f["code"] == "drift-regression"
                   for f in lenient.models()["drifting"]["findings"])
    assert "drifting: cached" in lenient.stdout  # the ratio judges, it is not measured


def test_fail_on_regression_passes_known_failures_and_fails_new_ones(repo: Repo,
                                                                   tmp_path: Path) -> None:
    known = repo.check(tmp_path / "known", "--baseline", str(repo.base), "--fail-on", "regression")
    assert known.code == 0, known.stdout  # `broken` failed on the base already
    assert repo.check(tmp_path / "error", "--baseline", str(repo.base)).code == 1
    # Without a baseline every error is new.
    assert repo.check(tmp_path / "nobase", "--fail-on", "regression").code == 1
    # `stable` breaks in this pull request: an error the base did not have for it.
    config = repo.path / "regressed.toml"
    config.write_text((repo.path / "onnx-parity.toml").read_text(encoding="utf-8").replace(
        'factory = "models.good:Linear"\ninputs = { x = "samples/x.npy" }\n'
        'dynamic-axes = { x = { 0 = "batch" } }\n\n[[model]]\nname = "broken"',
        'factory = "models.tiny:Branchy"\nexporter = "torchscript"\n'
        'inputs = { x = "samples/mixed.npy" }\n\n[[model]]\nname = "broken"'), encoding="utf-8")
    regressed = repo.check(tmp_path / "regressed", "--baseline", str(repo.base),
                           "--fail-on", "regression", config="regressed.toml")
    assert regressed.code == 1
    stable = regressed.models()["stable"]
    assert not stable["passed"]
    assert stable["baseline"]["passed"] is True
    assert "data-dependent-branch" not in stable["baseline"]["error_codes"]


@pytest.mark.parametrize("content", [None, "{not json", '{"tool": "something-else"}'])
def test_an_unreadable_baseline_is_exit_2_before_any_model_runs(repo: Repo, tmp_path: Path,
                                                                content: str | None) -> None:
    baseline = tmp_path / "base.json"
    if content is not None:
        baseline.write_text(content, encoding="utf-8")
    done = repo.check(tmp_path / "out", "--baseline", str(baseline))
    assert done.code == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"onnx-parity: --baseline {baseline}: ")
    assert "Fix:" in done.stderr
    assert not (tmp_path / "out").exists()
