"""`run_action` end to end: real event payloads, the runner's files, the fake GitHub over HTTP.

The check here builds a RunResult from dataclasses and writes the report files as the engine
does; that tests the orchestration (order, fork policy, annotations, comment, outputs, exit
codes, token hygiene). A test through the real engine follows at the end when the CLI has it.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ci_schemas import junit_errors, sarif_errors
from fake_github import FakeGitHub, Token
from onnx_parity.commands.action import run_action
from onnx_parity.commands.comment import run_comment_command
from onnx_parity.findings import Finding, Severity
from onnx_parity.publishing.files import write_outputs
from onnx_parity.publishing.github.action import CheckOutcome, CheckRequest
from onnx_parity.publishing.github.http import GitHubClient, RetryPolicy
from onnx_parity.publishing.github.inputs import FailOn
from onnx_parity.publishing.github.preflight import installed_constraints
from onnx_parity.publishing.github.step_results import gate_passed
from onnx_parity.report.markdown import render_markdown
from onnx_parity.report.serialization import run_to_json
from onnx_parity.results import ModelResult, OutputComparison, RunResult
from onnx_parity.settings.values import ConfigError
from test_action_inputs import example, fork_variant, runner_environment
from test_workflow_commands import parse_command, parse_output_file

TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
READ_ONLY = "ghs_readonlyForkToken0000000000000000000"
REPO = "Codertocat/Hello-World"


# -- building blocks ------------------------------------------------------------------------


def model(name: str, *findings: Finding, log: str = "", atol: float = 1e-5) -> ModelResult:
    comparison = OutputComparison("output", 1, (1, 10), (1, 10), "float32", "float32", 3e-7,
                                  1e-6, 0, 10, 3e-7, True)
    return ModelResult(name=name, exporter="dynamo", requested_opset=18, opset=18, atol=atol,
                       rtol=1e-4, batch_sizes=(1, 4), findings=tuple(findings),
                       comparisons=(comparison,), log=log)


def branch(line: int, file: str = "nets/gate.py") -> Finding:
    return Finding("data-dependent-branch", f"`if x.sum() > 0` decides the branch (line {line})",
                   file=file, line=line)


@dataclass
class FakeCheck:
    """A check that returns a fixed RunResult and writes the output folder with the real writer."""

    run: RunResult
    calls: list[CheckRequest] = field(default_factory=list)
    environ_seen: list[dict[str, str]] = field(default_factory=list)
    print_environment: bool = False

    def __call__(self, request: CheckRequest) -> CheckOutcome:
        self.calls.append(request)
        self.environ_seen.append(dict(os.environ))
        if self.print_environment:  # what a careless model would do
            print(dict(os.environ))
        written = write_outputs(self.run, render_markdown(self.run), request.out_dir,
                                request.source_root)
        return CheckOutcome(self.run, self.run.config_path, written.report_json,
                            written.report_markdown, written.report_sarif, written.report_junit)


@dataclass
class Step:
    code: int
    stdout: str
    stderr: str
    env: dict[str, str]

    @property
    def outputs(self) -> dict[str, str]:
        path = Path(self.env["GITHUB_OUTPUT"])
        return parse_output_file(path.read_text(encoding="utf-8")) if path.exists() else {}

    @property
    def summary(self) -> str:
        path = Path(self.env["GITHUB_STEP_SUMMARY"])
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def commands(self, name: str) -> list[tuple[dict[str, str], str]]:
        return [parse_command(line)[1:] for line in self.stdout.splitlines()
                if line.startswith(f"::{name} ") or line.startswith(f"::{name}::")]


def client_factory(api_url: str, token: str) -> GitHubClient:
    return GitHubClient(api_url, token, RetryPolicy(timeout_seconds=5, attempts=2,
                                                    backoff_seconds=0.01,
                                                    max_total_wait_seconds=1))


def run_step(env: dict[str, str], check) -> Step:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_action(env, check=check, client_factory=client_factory, stdout=stdout,
                      stderr=stderr)
    return Step(code, stdout.getvalue(), stderr.getvalue(), env)


@pytest.fixture
def github():
    with FakeGitHub({TOKEN: Token.installation(),
                     READ_ONLY: Token.installation(can_write=False)}) as server:
        yield server


def pr_env(tmp_path: Path, github: FakeGitHub, payload: dict | None = None,
           event: str = "pull_request", **inputs: str) -> dict[str, str]:
    payload = payload or example("pull_request", "opened")
    inputs.setdefault("github_token", TOKEN)
    env = runner_environment(tmp_path, event, payload, **inputs)
    env["GITHUB_API_URL"] = github.url
    return env


PASSING = RunResult("onnx-parity.toml", {"torch": "2.13.0"}, (model("resnet-tiny"),))
FAILING = RunResult("onnx-parity.toml", {"torch": "2.13.0"},
                    (model("resnet-tiny"), model("gate-net", branch(12))))


# -- pull requests: the sticky comment ------------------------------------------------------


def test_first_run_creates_one_comment_and_the_second_updates_it(tmp_path, github):
    env = pr_env(tmp_path, github)
    first = run_step(env, FakeCheck(FAILING))
    number = example("pull_request", "opened")["number"]
    assert first.code == 1
    comments = github.comments_on(REPO, number)
    assert len(comments) == 1
    assert "gate-net" in comments[0]["body"]
    assert first.outputs["comment-url"] == comments[0]["html_url"]

    second = run_step(env, FakeCheck(PASSING))
    comments = github.comments_on(REPO, number)
    assert second.code == 0
    assert len(comments) == 1
    assert "gate-net" not in comments[0]["body"]
    assert "resnet-tiny" in comments[0]["body"]
    assert len(github.requests("POST")) == 1
    assert len(github.requests("PATCH")) == 1


def test_outputs_summary_and_annotations_of_a_failing_pr(tmp_path, github):
    env = pr_env(tmp_path, github, working_directory="ml")
    (Path(env["GITHUB_WORKSPACE"]) / "ml").mkdir()
    check = FakeCheck(FAILING)
    step = run_step(env, check)
    assert check.calls[0].repo == Path(env["GITHUB_WORKSPACE"]).resolve() / "ml"
    assert step.outputs["passed"] == "false"
    assert step.outputs["failed-models"] == "gate-net"
    assert step.outputs["report-json"] == "onnx-parity-out/report.json"
    assert step.outputs["report-markdown"] == "onnx-parity-out/report.md"
    head = example("pull_request", "opened")["pull_request"]["head"]["sha"]
    assert f"https://github.com/{REPO}/blob/{head}/ml/nets/gate.py#L12" in step.summary
    [(props, message)] = step.commands("error")
    assert props == {"file": "ml/nets/gate.py", "line": "12",
                     "title": "data-dependent-branch in gate-net"}
    assert "Fix: Rewrite the branch as tensor ops" in message


def test_push_makes_no_comment_but_writes_summary_and_outputs(tmp_path, github):
    env = pr_env(tmp_path, github, payload=example("push"), event="push")
    step = run_step(env, FakeCheck(FAILING))
    assert step.code == 1
    assert github.exchanges == []
    assert step.outputs == {"passed": "false", "failed-models": "gate-net", "comment-url": "",
                            "report-json": "onnx-parity-out/report.json",
                            "report-markdown": "onnx-parity-out/report.md",
                            "report-sarif": "onnx-parity-out/report.sarif",
                            "report-junit": "onnx-parity-out/report.junit.xml"}
    assert f"https://github.com/{REPO}/blob/{'f' * 40}/nets/gate.py#L12" in step.summary


def test_fork_pull_request_comment_refused_once_warns_and_keeps_the_verdict(tmp_path, github):
    payload = fork_variant(example("pull_request", "opened"))
    for run, expected in ((FAILING, 1), (PASSING, 0)):
        github.exchanges.clear()
        step = run_step(pr_env(tmp_path, github, payload, github_token=READ_ONLY),
                        FakeCheck(run))
        assert step.code == expected
        assert len(github.requests("POST")) == 1
        [(props, message)] = step.commands("warning")
        assert props["title"] == "onnx-parity: PR comment"
        assert "Resource not accessible by integration" in message
        assert "workflow_run" in message
        assert step.outputs["comment-url"] == ""


def test_pull_request_target_from_a_fork_is_refused_before_any_code_runs(tmp_path, github):
    payload = fork_variant(example("pull_request", "opened"))
    env = pr_env(tmp_path, github, payload, event="pull_request_target",
                 requirements="requirements.txt")
    (Path(env["GITHUB_WORKSPACE"]) / "requirements.txt").write_text("numpy\n", encoding="utf-8")
    check = FakeCheck(PASSING)
    step = run_step(env, check)
    assert step.code == 2
    assert check.calls == []
    assert "pip install" not in step.stdout
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: fork pull request"
    assert "mallory/Hello-World" in message
    assert "comment-from-report" in message
    assert github.exchanges == []
    assert not Path(env["GITHUB_OUTPUT"]).exists()


def test_pull_request_target_from_a_fork_runs_when_opted_in(tmp_path, github):
    payload = fork_variant(example("pull_request", "opened"))
    env = pr_env(tmp_path, github, payload, event="pull_request_target",
                 run_fork_code_with_write_token="true")
    check = FakeCheck(PASSING)
    step = run_step(env, check)
    assert step.code == 0
    assert len(check.calls) == 1
    assert any("fork code" in props.get("title", "") for props, _ in step.commands("warning"))
    assert len(github.comments_on(REPO, payload["number"])) == 1


def test_a_report_too_long_for_a_comment_is_cut_with_a_pointer(tmp_path, github):
    many = tuple(model(f"generated-model-{i:04d}-with-a-long-descriptive-name",
                       branch(i, file=f"nets/generated_{i}.py")) for i in range(900))
    step = run_step(pr_env(tmp_path, github), FakeCheck(RunResult("onnx-parity.toml", {}, many)))
    [comment] = github.comments_on(REPO, example("pull_request", "opened")["number"])
    assert len(render_markdown(RunResult("onnx-parity.toml", {}, many), detail=0)) > 65_536
    assert len(comment["body"]) < 65_536
    assert "cut to GitHub's 65,536-character limit" in comment["body"]
    assert "https://github.com/Codertocat/Hello-World/actions/runs/4242" in comment["body"]
    assert "generated-model-0000" in comment["body"]
    assert step.code == 1
    assert "generated-model-0899" in step.summary


def test_a_boolean_typo_exits_2_naming_the_input(tmp_path, github):
    check = FakeCheck(PASSING)
    step = run_step(pr_env(tmp_path, github, comment="yes"), check)
    assert step.code == 2
    assert check.calls == []
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: invalid input"
    assert message.startswith('input "comment" is "yes"')


def test_a_configuration_error_exits_2_with_its_message(tmp_path, github):
    def check(_request: CheckRequest) -> CheckOutcome:
        raise ConfigError("onnx-parity.toml, [[model]] 1: key `factroy` is unknown; did you "
                          "mean `factory`?")
    step = run_step(pr_env(tmp_path, github), check)
    assert step.code == 2
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: configuration"
    assert "`factroy`" in message


def test_twelve_located_findings_make_ten_errors_and_one_notice(tmp_path, github):
    run = RunResult("onnx-parity.toml", {}, (model("gate-net", *(branch(i) for i in range(1, 13))),))
    step = run_step(pr_env(tmp_path, github), FakeCheck(run))
    errors = step.commands("error")
    assert len(errors) == 10
    assert [props["line"] for props, _ in errors] == [str(i) for i in range(1, 11)]
    [(_, notice)] = step.commands("notice")
    assert notice.startswith("2 more findings not annotated; see the summary")
    assert "nets/gate.py#L12" in step.summary


def test_warnings_are_annotated_as_warnings_and_fail_only_with_fail_on_warning(tmp_path, github):
    warned = Finding("tracer-warning", "int(t) in a library", file="vendor/lib.py", line=3,
                     severity=Severity.WARNING)
    run = RunResult("onnx-parity.toml", {}, (model("lib-net", warned),))
    results = {}
    for fail_on in ("error", "warning", "never"):
        step = run_step(pr_env(tmp_path, github, fail_on=fail_on), FakeCheck(run))
        results[fail_on] = step.code
    assert results == {"error": 0, "warning": 1, "never": 0}
    [(props, _)] = step.commands("warning")
    assert props["title"] == "tracer-warning in lib-net"
    assert props["file"] == "vendor/lib.py"


def test_the_gate_per_fail_on():
    noted = RunResult("c", {}, (model("m", Finding("training-mode", "switched to eval()")),))
    assert all(gate_passed(noted, fail_on) for fail_on in FailOn)  # notes never fail
    assert not gate_passed(FAILING, FailOn.ERROR)
    assert gate_passed(FAILING, FailOn.NEVER)


# -- token hygiene --------------------------------------------------------------------------


def test_the_token_appears_in_no_byte_written(tmp_path, github, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "runtime-secret-value-123")
    leaky = model("gate-net", Finding("data-dependent-branch", f"saw header Bearer {TOKEN}",
                                      file="nets/gate.py", line=4),
                  log=f"::add-mask::nothing\nGITHUB_TOKEN={TOKEN}\n")
    run = RunResult("onnx-parity.toml", {}, (leaky,))
    check = FakeCheck(run, print_environment=True)
    env = pr_env(tmp_path, github)
    env["GITHUB_TOKEN"] = TOKEN
    step = run_step(env, check)

    assert step.stdout.splitlines()[0] == f"::add-mask::{TOKEN}"
    assert [line for line in step.stdout.splitlines() if TOKEN in line] == [f"::add-mask::{TOKEN}"]
    seen = check.environ_seen[0]
    assert not {"GITHUB_TOKEN", "INPUT_GITHUB-TOKEN", "ACTIONS_RUNTIME_TOKEN"} & set(seen)
    assert TOKEN not in json.dumps(seen)
    written = [step.stderr, step.summary, Path(step.env["GITHUB_OUTPUT"]).read_text()]
    written += [p.read_text() for p in (Path(env["GITHUB_WORKSPACE"]) / "onnx-parity-out").rglob("*")]
    written += [json.dumps(e.body) for e in github.exchanges]
    assert all(TOKEN not in text for text in written)
    assert "saw header Bearer ***" in github.comments_on(REPO, 2)[0]["body"]
    assert os.environ.get("GITHUB_TOKEN") is None  # gone for the rest of the process too


# -- requirements ---------------------------------------------------------------------------


def test_requirements_install_under_the_pinned_constraints(tmp_path, github):
    env = pr_env(tmp_path, github, requirements="requirements.txt")
    env["PIP_NO_INDEX"] = "1"  # offline: an installed requirement needs no index
    (Path(env["GITHUB_WORKSPACE"]) / "requirements.txt").write_text("numpy\n", encoding="utf-8")
    step = run_step(env, FakeCheck(PASSING))
    assert step.code == 0
    assert "::group::onnx-parity: pip install -r requirements.txt" in step.stdout
    assert "Requirement already satisfied: numpy" in step.stdout
    assert "torch==2.13.0" in installed_constraints()


def test_a_requirement_that_would_move_torch_fails_with_pips_lines(tmp_path, github):
    env = pr_env(tmp_path, github, requirements="requirements.txt")
    env["PIP_NO_INDEX"] = "1"
    (Path(env["GITHUB_WORKSPACE"]) / "requirements.txt").write_text("torch==2.0.1\n",
                                                                    encoding="utf-8")
    check = FakeCheck(PASSING)
    step = run_step(env, check)
    assert step.code == 2
    assert check.calls == []
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: requirements"
    assert "torch" in message
    assert "pip's last lines" in message


def test_requirements_outside_the_working_directory_are_refused(tmp_path, github):
    step = run_step(pr_env(tmp_path, github, requirements="../../etc/passwd"), FakeCheck(PASSING))
    assert step.code == 2
    assert re.search(r'input "requirements" is "\.\./\.\./etc/passwd".*outside',
                     step.commands("error")[0][1])


# -- the two-job mode: comment from a report -------------------------------------------------


def write_report(env: dict[str, str], run: RunResult) -> str:
    path = Path(env["GITHUB_WORKSPACE"]) / "artifact" / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run_to_json(run)), encoding="utf-8")
    return "artifact/report.json"


def test_comment_from_report_finds_a_fork_pr_by_its_head_sha(tmp_path, github):
    payload = example("workflow_run", "completed", lambda p: not p["workflow_run"]["pull_requests"])
    sha = payload["workflow_run"]["head_sha"]
    repository = payload["repository"]["full_name"]
    github.add_pull(repository, 77, sha, head_repository="mallory/octo-repo")
    env = pr_env(tmp_path, github, payload, event="workflow_run")
    env["INPUT_COMMENT-FROM-REPORT"] = write_report(env, FAILING)
    check = FakeCheck(PASSING)
    step = run_step(env, check)
    assert check.calls == []
    assert step.code == 1
    assert len(github.requests("GET", rf"/commits/{sha}/pulls")) == 1
    [comment] = github.comments_on(repository, 77)
    assert "gate-net" in comment["body"]
    assert step.outputs["report-json"] == "artifact/report.json"
    assert step.outputs["comment-url"] == comment["html_url"]
    assert step.outputs["report-sarif"] == step.outputs["report-junit"] == ""  # none written


def test_comment_from_report_uses_the_listed_pr_without_a_lookup(tmp_path, github):
    payload = example("workflow_run", "completed", lambda p: p["workflow_run"]["pull_requests"])
    number = payload["workflow_run"]["pull_requests"][0]["number"]
    env = pr_env(tmp_path, github, payload, event="workflow_run", fail_on="never")
    env["INPUT_COMMENT-FROM-REPORT"] = write_report(env, FAILING)
    step = run_step(env, FakeCheck(PASSING))
    assert step.code == 0
    assert github.requests("GET", r"/pulls$") == []
    assert len(github.comments_on(payload["repository"]["full_name"], number)) == 1


def test_comment_from_report_outside_the_workspace_is_refused(tmp_path, github):
    env = pr_env(tmp_path, github, comment_from_report="../event.json")
    step = run_step(env, FakeCheck(PASSING))
    assert step.code == 2
    assert 'input "comment-from-report"' in step.commands("error")[0][1]


def test_comment_command_posts_a_report_and_refuses_a_non_report(tmp_path, github):
    env = pr_env(tmp_path, github)
    report = Path(env["GITHUB_WORKSPACE"]) / write_report(env, PASSING)
    out = io.StringIO()
    assert run_comment_command(report, env, client_factory, out) == 0
    assert len(github.comments_on(REPO, 2)) == 1
    report.write_text('{"tool": "something-else"}', encoding="utf-8")
    out = io.StringIO()
    assert run_comment_command(report, env, client_factory, out) == 2
    assert "not an onnx-parity report.json" in out.getvalue()


# -- through the real engine, as the container runs it ---------------------------------------

TINY_MODELS = '''
import os
import sys

import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def tiny():
    # What a careless (or hostile) model does: print every variable it can see.
    print("ENVIRONMENT", dict(os.environ))
    print("ENVIRONMENT", dict(os.environ), file=sys.stderr)
    torch.manual_seed(0)
    return Tiny().eval()


def gate():
    return Gate().eval()
'''

TINY_CONFIG = '''
[[model]]
name = "tiny"
factory = "models.nets:tiny"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "gate"
factory = "models.nets:gate"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
exporter = "torchscript"
'''


@pytest.mark.slow
def test_real_engine_in_a_real_process_keeps_the_token_out_of_every_byte(tmp_path, github):
    import subprocess
    import sys

    import numpy as np

    env = pr_env(tmp_path, github, working_directory="project", fail_on="error")
    project = Path(env["GITHUB_WORKSPACE"]) / "project"
    (project / "models").mkdir(parents=True)
    (project / "samples").mkdir()
    (project / "models" / "nets.py").write_text(TINY_MODELS, encoding="utf-8")
    (project / "onnx-parity.toml").write_text(TINY_CONFIG, encoding="utf-8")
    np.save(project / "samples" / "x.npy", np.linspace(0.1, 1.0, 4, dtype=np.float32)[None])
    process_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    process_env |= env | {"GITHUB_TOKEN": TOKEN, "ACTIONS_RUNTIME_TOKEN": "runtime-" + TOKEN}
    done = subprocess.run([sys.executable, "-m", "onnx_parity", "action"], env=process_env,
                          cwd=Path(env["GITHUB_WORKSPACE"]), capture_output=True, text=True,
                          timeout=600, check=False)
    step = Step(done.returncode, done.stdout, done.stderr, env)

    assert step.code == 1, step.stdout + step.stderr  # gate's branch is an error finding
    assert "ENVIRONMENT" in step.stdout + step.stderr + (project.parent / "onnx-parity-out" /
                                                         "tiny.log").read_text()
    assert step.stdout.splitlines()[0] == f"::add-mask::{TOKEN}"
    assert [line for line in step.stdout.splitlines() if TOKEN in line] == [f"::add-mask::{TOKEN}"]
    written = {"stderr": step.stderr, "summary": step.summary,
               "outputs": Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")}
    for path in (Path(env["GITHUB_WORKSPACE"]) / "onnx-parity-out").rglob("*"):
        written[path.name] = path.read_bytes().decode("utf-8", "replace")
    written["requests"] = json.dumps([e.body for e in github.exchanges])
    assert {name for name, text in written.items() if TOKEN in text} == set()

    assert step.outputs["failed-models"] == "gate"
    assert step.outputs["passed"] == "false"
    errors = [props for props, _ in step.commands("error")]
    assert any(p["file"] == "project/models/nets.py" and p["title"].endswith("in gate")
               for p in errors), errors
    [comment] = github.comments_on(REPO, 2)
    assert "`gate`" in comment["body"]
    assert comment["html_url"] == step.outputs["comment-url"]

    # SARIF and JUnit beside the report, their paths as outputs; SARIF's file paths are
    # relative to the repository root (the workspace), not to working-directory.
    workspace = Path(env["GITHUB_WORKSPACE"])
    assert step.outputs["report-sarif"] == "onnx-parity-out/report.sarif"
    assert step.outputs["report-junit"] == "onnx-parity-out/report.junit.xml"
    sarif = json.loads((workspace / step.outputs["report-sarif"]).read_text(encoding="utf-8"))
    assert sarif_errors(sarif) == []
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in sarif["runs"][0]["results"]}
    assert uris == {"project/models/nets.py"}
    assert junit_errors(workspace / step.outputs["report-junit"]) == []


def test_a_bug_in_the_check_is_exit_3_with_a_redacted_traceback(tmp_path, github):
    def check(_request: CheckRequest) -> CheckOutcome:
        raise RuntimeError(f"unexpected state while holding {TOKEN}")
    step = run_step(pr_env(tmp_path, github), check)
    assert step.code == 3
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: internal error"
    assert message.startswith("RuntimeError: unexpected state while holding ***")
    assert "Traceback (most recent call last)" in step.stdout
    assert step.stdout.count(TOKEN) == 1  # the ::add-mask:: line only


def test_an_unwritable_output_folder_is_exit_2(tmp_path, github):
    from onnx_parity.publishing.files import OutputError

    def check(request: CheckRequest) -> CheckOutcome:
        raise OutputError(f"cannot write the report into {request.out_dir}: Permission denied.")
    step = run_step(pr_env(tmp_path, github), check)
    assert step.code == 2
    assert step.commands("error")[0][0]["title"] == "onnx-parity: output folder"
