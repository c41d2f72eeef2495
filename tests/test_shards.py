"""Shards over a CI matrix and the merge: the partition's properties, a merge equal to a single
run (through the real CLI), every way a set of shard reports can be wrong (exit 2), and 100 tiny
models over 4 shards merged by the action into one comment that fits one body.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fake_github import FakeGitHub, Token
from fixture_repo.harness import CliRun, copy_repo, run_cli, write_samples
from onnx_parity.commands.action import run_action
from onnx_parity.commands.merge import merge_for_action
from onnx_parity.pipeline.shards import parse_shard, partition
from onnx_parity.publishing.github.action import CheckOutcome, CheckRequest
from onnx_parity.publishing.github.comments import BODY_LIMIT
from onnx_parity.results import Shard
from onnx_parity.settings.values import ConfigError
from test_action_flow import REPO, TOKEN, client_factory, pr_env
from test_action_inputs import example

CONFIG = "configs/cache.toml"
NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True), unique=True,
                 max_size=40)


# -- the partition ----------------------------------------------------------------------------


@given(NAMES, st.integers(1, 9), st.data())
def test_every_model_is_in_exactly_one_shard_whatever_the_durations(names, count, data) -> None:
    timed = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    durations = {name: data.draw(st.floats(0.01, 500)) for name in timed}
    parts = partition(names, count, durations)
    assert len(parts) == count
    flat = [name for part in parts for name in part]
    assert sorted(flat) == sorted(names)  # each exactly once
    assert parts == partition(list(names), count, dict(durations))  # deterministic
    for part in parts:  # configuration order inside each shard
        assert part == [name for name in names if name in part]


@given(NAMES, st.integers(1, 9))
def test_without_durations_the_shards_differ_by_at_most_one_model(names, count) -> None:
    sizes = [len(part) for part in partition(names, count, {})]
    assert max(sizes) - min(sizes) <= 1


def test_durations_balance_the_work() -> None:
    durations = {"huge": 60.0, "a": 10.0, "b": 10.0, "c": 10.0, "d": 10.0, "e": 10.0, "f": 10.0}
    parts = partition(list(durations), 2, durations)
    loads = sorted(sum(durations[name] for name in part) for part in parts)
    assert loads == [60.0, 60.0]
    assert ["huge"] in parts


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "two/four", "1/0", "-1/3"])
def test_a_shard_that_names_no_part_is_refused(text: str) -> None:
    with pytest.raises(Exception, match=r"write K/N with 1 <= K <= N") as error:
        parse_shard(text, "--shard")
    assert not isinstance(error.value, ConfigError)
    assert parse_shard(" 2 / 4 ", "--shard") == Shard(2, 4)


def test_a_bad_shard_on_the_command_line_is_exit_2_before_any_worker(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    done = run_cli("check", "--config", CONFIG, "--shard", "3/2", cwd=repo, out=tmp_path / "out")
    assert done.code == 2
    assert done.stdout == ""
    assert done.stderr.strip() == ('onnx-parity: --shard is "3/2": write K/N with 1 <= K <= N, '
                                   "e.g. 2/4 for the second of four shards (a CI matrix of "
                                   "shard: [1, 2, 3, 4]).")
    assert not (tmp_path / "out").exists()


# -- merge through the real CLI ---------------------------------------------------------------


def run_together(commands: Sequence[list[str]], cwd: Path) -> None:
    """Start the commands at once (as matrix jobs do) and wait for all of them."""
    runs = [subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for command in commands]
    outputs = [run.communicate(timeout=900) for run in runs]
    assert all(run.returncode in (0, 1) for run in runs), outputs


def shard_command(config: str, shard: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "onnx_parity", "check", "--config", config, "--shard", shard,
            "--jobs", "1", "--out", str(out)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliRun]:
    root = tmp_path_factory.mktemp("shards")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    run_together([shard_command(CONFIG, f"{k}/2", root / f"shard-{k}") for k in (1, 2)]
                 + [[sys.executable, "-m", "onnx_parity", "check", "--config", CONFIG,
                     "--jobs", "2", "--out", str(root / "single")]], repo)
    return root, CliRun(0, "", "", 0.0, root / "single")


def merge(root: Path, *reports: Path, out: str = "merged") -> CliRun:
    return run_cli("merge", *map(str, reports), cwd=root, out=root / out)


@pytest.mark.slow
def test_the_merged_report_is_the_single_runs_apart_from_the_footer(shards) -> None:
    root, single = shards
    reports = [root / f"shard-{k}" / "report.json" for k in (1, 2)]
    shard_reports = [json.loads(path.read_text(encoding="utf-8")) for path in reports]
    assert [r["shard"] for r in shard_reports] == ["1/2", "2/2"]
    assert all(r["configured_models"] == ["alpha", "good", "drifting"] for r in shard_reports)
    assert sorted(len(r["models"]) for r in shard_reports) == [1, 2]
    done = merge(root, *reversed(reports))  # any order
    assert done.code == 0, done.stderr
    merged_md = (root / "merged" / "report.md").read_text(encoding="utf-8").splitlines()
    single_md = (single.folder / "report.md").read_text(encoding="utf-8").splitlines()
    assert merged_md[:-1] == single_md[:-1]
    assert merged_md[-1] != single_md[-1]
    assert "merged from 2 shards" in merged_md[-1]
    merged, alone = done.report(), single.report()
    assert [untimed(m) for m in merged["models"]] == [untimed(m) for m in alone["models"]]
    assert merged["shard"] is None
    assert merged["passed"] is alone["passed"] is True


def untimed(model: dict) -> dict:
    """A model of report.json without its wall times and its worker's peak memory (the only
    figures that vary from run to run)."""
    attempts = [{k: v for k, v in a.items() if k != "seconds"} for a in model["attempts"]]
    varying = ("steps", "seconds", "max_rss_bytes")
    return {**{k: v for k, v in model.items() if k not in varying}, "attempts": attempts}


@pytest.mark.slow
def test_a_missing_doubled_or_foreign_shard_is_exit_2_naming_it(shards) -> None:
    root, single = shards
    one, two = (root / f"shard-{k}" / "report.json" for k in (1, 2))
    missing = merge(root, one, out="m1")
    assert missing.code == 2
    assert "shard 2/2 is missing: 1 of 2 reports" in missing.stderr
    doubled = merge(root, one, one, two, out="m2")
    assert doubled.code == 2
    assert "shard 1/2 is given twice" in doubled.stderr
    not_a_shard = merge(root, one, single.folder / "report.json", out="m3")
    assert not_a_shard.code == 2
    assert "is not a shard's report" in not_a_shard.stderr
    other = json.loads(two.read_text(encoding="utf-8"))
    other["versions"]["torch"] = "2.99.0"
    (root / "other.json").write_text(json.dumps(other), encoding="utf-8")
    versions = merge(root, one, root / "other.json", out="m4")
    assert versions.code == 2
    assert "disagree on the tool and library versions" in versions.stderr
    other = json.loads(two.read_text(encoding="utf-8"))
    other["configuration_sha256"] = "0" * 64
    (root / "config.json").write_text(json.dumps(other), encoding="utf-8")
    config = merge(root, one, root / "config.json", out="m5")
    assert config.code == 2
    assert "disagree on the configuration" in config.stderr
    unreadable = merge(root, one, root / "nothing.json", out="m6")
    assert unreadable.code == 2
    assert "cannot be read" in unreadable.stderr
    for done in (missing, doubled, not_a_shard, versions, config, unreadable):
        assert "Traceback" not in done.stderr
        assert not (done.folder / "report.json").exists()


# -- 100 models over 4 shards, merged by the action ---------------------------------------------


def hundred_models(repo: Path) -> str:
    """100 tiny models; every tenth has a data-dependent branch the TorchScript tracer bakes in."""
    lines = ['exporter = "torchscript"', "batch-sizes = [1, 2]", ""]
    for index in range(100):
        broken = index % 10 == 9
        lines += ["[[model]]", f'name = "m{index:03d}"',
                  f'factory = "{"models.tiny:Branchy" if broken else "models.good:Linear"}"',
                  f'inputs = {{ x = "samples/{"mixed" if broken else "x"}.npy" }}',
                  'dynamic-axes = { x = { 0 = "batch" } }', ""]
    (repo / "configs" / "hundred.toml").write_text("\n".join(lines), encoding="utf-8")
    return "configs/hundred.toml"


@pytest.mark.slow
def test_a_hundred_models_over_four_shards_make_one_comment_in_one_body(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    repo = copy_repo(workspace)
    write_samples(repo)
    config = hundred_models(repo)
    for pair in ((1, 2), (3, 4)):  # two matrix jobs at a time on two cores
        run_together([shard_command(config, f"{k}/4", workspace / "shards" / str(k))
                      for k in pair], repo)
    reports = [json.loads((workspace / "shards" / str(k) / "report.json").read_text("utf-8"))
               for k in range(1, 5)]
    assert sorted(len(report["models"]) for report in reports) == [25, 25, 25, 25]
    with FakeGitHub({TOKEN: Token.installation()}) as github:
        env = pr_env(tmp_path, github, merge_reports="shards/*/report.json")
        assert env["GITHUB_WORKSPACE"] == str(workspace)
        stdout, stderr = io.StringIO(), io.StringIO()
        code = run_action(env, check=_no_check, client_factory=client_factory, stdout=stdout,
                          stderr=stderr, merge=merge_for_action)
        comments = github.comments_on(REPO, example("pull_request", "opened")["number"])
    assert code == 1, stdout.getvalue()
    merged = json.loads((workspace / "onnx-parity-out" / "report.json").read_text("utf-8"))
    assert [m["name"] for m in merged["models"]] == [f"m{i:03d}" for i in range(100)]
    assert len(merged["failed_models"]) == 10
    assert len(comments) == 1
    body = comments[0]["body"]
    assert len(body) <= BODY_LIMIT
    assert "was cut" not in body
    assert all(f"`m{i:03d}`" in body for i in range(100))
    assert body.count("<details>") == 10  # every failing model with its findings
    shutil.rmtree(workspace / "shards")


def _no_check(request: CheckRequest) -> CheckOutcome:
    raise AssertionError(f"merge-reports must not run any model ({request})")
