"""The action's inputs for runs that scale: `shard` (no comment, no annotations), `cache-dir` and
`baseline-report` (handed to the check, kept inside the workspace), `fail-on: regression`, and
`merge-reports` that matches nothing. The real merge of real shards is in test_shards.py.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator

import pytest

from fake_github import FakeGitHub, Token
from onnx_parity.commands.action import run_action
from onnx_parity.commands.merge import merge_for_action
from onnx_parity.findings import Finding
from onnx_parity.results import BaseFigures, RunResult, Shard
from test_action_flow import (
    FAILING,
    REPO,
    TOKEN,
    FakeCheck,
    branch,
    client_factory,
    model,
    pr_env,
    run_step,
)
from test_action_inputs import example

NUMBER = example("pull_request", "opened")["number"]


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub({TOKEN: Token.installation()}) as server:
        yield server


def test_a_shard_posts_no_comment_and_no_annotations_but_keeps_its_outputs(tmp_path, github):
    run = dataclasses.replace(FAILING, shard=Shard(2, 4), configured_models=("a", "b"))
    check = FakeCheck(run)
    step = run_step(pr_env(tmp_path, github, shard="2/4", fail_on="never"), check)
    assert step.code == 0
    assert check.calls[0].shard == "2/4"
    assert github.comments_on(REPO, NUMBER) == []
    assert github.requests("POST") == []
    assert step.commands("error") == []
    assert step.outputs["passed"] == "false"
    assert step.outputs["failed-models"] == "gate-net"
    assert "(shard 2/4)" in step.summary


def test_a_bad_shard_is_exit_2_naming_the_input(tmp_path, github):
    check = FakeCheck(FAILING)
    step = run_step(pr_env(tmp_path, github, shard="5/4"), check)
    assert step.code == 2
    assert check.calls == []
    assert 'input "shard" is "5/4": write K/N with 1 <= K <= N' in step.stdout


def test_cache_dir_and_baseline_report_reach_the_check_inside_the_workspace(tmp_path, github):
    check = FakeCheck(FAILING)
    env = pr_env(tmp_path, github, cache_dir=".onnx-parity-cache",
                 baseline_report="base/report.json")
    run_step(env, check)
    workspace = tmp_path / "workspace"
    request = check.calls[0]
    assert request.cache_dir == (workspace / ".onnx-parity-cache").resolve()
    assert request.baseline == (workspace / "base" / "report.json").resolve()
    (tmp_path / "o").mkdir()
    outside = run_step(pr_env(tmp_path / "o", github, cache_dir="../cache"), FakeCheck(FAILING))
    assert outside.code == 2
    assert 'input "cache-dir" is "../cache"' in outside.stdout


def test_fail_on_regression_passes_failures_the_baseline_already_had(tmp_path, github):
    known = BaseFigures(passed=False, max_abs_diff=3e-7, error_codes=("data-dependent-branch",))
    gate = model("gate-net", branch(12))
    old = dataclasses.replace(gate, base=known)
    step = run_step(pr_env(tmp_path, github, fail_on="regression"),
                    FakeCheck(dataclasses.replace(FAILING, models=(model("resnet-tiny"), old))))
    assert step.code == 0
    (tmp_path / "again").mkdir()
    new_error = dataclasses.replace(old, findings=(*old.findings, Finding("runtime-error", "x")))
    again = run_step(pr_env(tmp_path / "again", github, fail_on="regression"),
                     FakeCheck(RunResult("onnx-parity.toml", {}, (new_error,))))
    assert again.code == 1
    assert "fail-on regression: FAIL" in again.stdout


def test_merge_reports_that_match_nothing_is_exit_2(tmp_path, github):
    check = FakeCheck(FAILING)
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_action(pr_env(tmp_path, github, merge_reports="shards/*/report.json"),
                      check=check, client_factory=client_factory, stdout=stdout, stderr=stderr,
                      merge=merge_for_action)
    assert code == 2
    assert check.calls == []
    assert 'input "merge-reports": "shards/*/report.json" matches no file' in stdout.getvalue()
