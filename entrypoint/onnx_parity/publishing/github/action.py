"""`onnx-parity action`: the engine wrapped for a GitHub Actions step.

Order matters and is the point of this module:
1. `::add-mask::` for the token is the first line written, before anything could echo it;
   the token then leaves `os.environ`, so model code run by the check can never read it.
2. Inputs and the event are read; a bad input stops here (exit 2).
3. `pull_request_target` with a fork head stops here (exit 2) unless the workflow opted in:
   that event carries a write token and secrets, and the check runs the PR's code.
4. `requirements` are installed under constraints that keep torch and onnxruntime in place.
5. The check runs in `working-directory`; then logs (folded), annotations, summary, outputs and
   the sticky comment; every byte written passes through the Redactor.
6. The exit code: 2 for configuration/input errors, 1 when the gate (`fail-on`) fails, else 0;
   3 for a bug (reported here, through the redactor, not by the caller).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import posixpath
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from onnx_parity.engine.results import ModelResult, RunResult
from onnx_parity.findings import Finding, Severity
from onnx_parity.publishing.github.commands import (
    Annotation,
    WorkflowCommands,
    fit_markdown,
    format_command,
    write_outputs,
    write_summary,
)
from onnx_parity.publishing.github.comments import BODY_LIMIT, comment_marker, upsert_comment
from onnx_parity.publishing.github.event import PULL_REQUEST_EVENTS, EventContext, EventError
from onnx_parity.publishing.github.http import GitHubClient, GitHubError
from onnx_parity.publishing.github.inputs import ActionInputs, FailOn, InputError
from onnx_parity.publishing.github.redaction import RedactingWriter, Redactor
from onnx_parity.publishing.files import OutputError
from onnx_parity.report.json_report import ReportFormatError, run_from_json
from onnx_parity.report.markdown import render_markdown
from onnx_parity.settings.schema import ConfigError

# Variables holding credentials: masked, redacted, and removed before any model code runs.
TOKEN_VARIABLES = ("INPUT_GITHUB-TOKEN", "GITHUB_TOKEN")
SECRET_VARIABLES = TOKEN_VARIABLES + ("ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
# GitHub shows about ten annotations of each level per step; more are dropped without a word.
ANNOTATION_CAP = 10
# The stack the engine was built and tested with: `requirements` may add packages, never move these.
PINNED_PACKAGES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy", "protobuf")
PIP_TAIL_LINES = 20

FORK_REFUSAL = (
    "Refusing to run: this is a pull_request_target event for pull request #{number}, whose "
    "head comes from the fork {head}. pull_request_target runs with a token that can write to "
    "{base} and with its secrets, and checking a pull request means importing and running its "
    "Python code: any fork author could take the token. No model was run and no requirement "
    "was installed. The safe set-up uses two workflows: one on `pull_request` (read-only token) "
    "runs onnx-parity with `comment: false` and uploads the output folder as an artifact; one "
    "on `workflow_run` downloads it and runs onnx-parity with `comment-from-report: "
    "<path>/report.json`, which posts the comment without running any model (see the README, "
    "\"Pull requests from forks\"). If you trust every fork author with write access, set "
    "`run-fork-code-with-write-token: true`."
)


class ForkPolicyError(Exception):
    """Fork code would run with a write token."""


class RequirementsError(Exception):
    """The `requirements` input cannot be installed."""


class ReportError(Exception):
    """The report given to `comment-from-report` / `onnx-parity comment` cannot be used."""


EXPECTED_ERRORS: dict[type[Exception], str] = {
    InputError: "invalid input",
    EventError: "event",
    ForkPolicyError: "fork pull request",
    RequirementsError: "requirements",
    ConfigError: "configuration",
    ReportError: "report",
    OutputError: "output folder",
}
EXIT_INVALID, EXIT_INTERNAL = 2, 3


@dataclass(frozen=True)
class CheckRequest:
    repo: Path  # the working directory: the repository as the configuration sees it
    config: Path | None  # None: the engine's default file in `repo`
    out_dir: Path


@dataclass(frozen=True)
class CheckOutcome:
    run: RunResult
    config_path: str  # relative to `repo`, as the comment marker names it
    report_json: Path
    report_markdown: Path


Check = Callable[[CheckRequest], CheckOutcome]
ClientFactory = Callable[[str, str], GitHubClient]  # (api_url, token)


@dataclass(frozen=True)
class Session:
    """What every publishing step needs: built once per invocation by `guarded`."""

    environ: Mapping[str, str]  # the invocation's environment, secrets removed
    token: str
    inputs: ActionInputs
    event: EventContext
    commands: WorkflowCommands
    redact: Redactor
    client_factory: ClientFactory
    stdout: TextIO
    stderr: TextIO


# -- entry points -------------------------------------------------------------------------


def run_action(environ: Mapping[str, str], *, check: Check, client_factory: ClientFactory,
               stdout: TextIO, stderr: TextIO) -> int:
    """The whole action step; returns the exit code."""
    return guarded(environ, client_factory, stdout, stderr,
                   lambda session: _action(session, check))


def guarded(environ: Mapping[str, str], client_factory: ClientFactory, stdout: TextIO,
            stderr: TextIO, body: Callable[[Session], int]) -> int:
    """Mask and remove the secrets, build the Session, map expected errors to exit code 2."""
    snapshot = dict(environ)  # `environ` may be os.environ itself, which is scrubbed below
    secrets = [snapshot.get(name, "") for name in SECRET_VARIABLES]
    for value in dict.fromkeys(v.strip() for v in secrets[:len(TOKEN_VARIABLES)] if v.strip()):
        stdout.write(f"::add-mask::{value}\n")
    stdout.flush()
    scrub_os_environ(secrets)
    redact = Redactor(v.strip() for v in secrets)
    out, err = RedactingWriter(stdout, redact), RedactingWriter(stderr, redact)
    commands = WorkflowCommands(out)  # type: ignore[arg-type]
    try:
        session = _session(snapshot, redact, commands, client_factory, out, err)
        return body(session)
    except tuple(EXPECTED_ERRORS) as error:
        kind = next(text for kind, text in EXPECTED_ERRORS.items() if isinstance(error, kind))
        commands.emit(format_command("error", str(error), title=f"onnx-parity: {kind}"))
        return EXIT_INVALID
    except Exception as error:  # a bug: report it here, where the text is redacted
        report_internal_error(commands, error)
        return EXIT_INTERNAL
    finally:
        out.flush()
        err.flush()


def report_internal_error(commands: WorkflowCommands, error: Exception) -> None:
    with commands.group("onnx-parity: internal error (traceback)"):
        commands.untrusted_text("".join(traceback.format_exception(error)))
    commands.emit(format_command(
        "error", f"{type(error).__name__}: {error}. This is a bug in onnx-parity; the "
        "traceback is in the group above. Please report it with that traceback.",
        title="onnx-parity: internal error"))


def scrub_os_environ(secrets: list[str]) -> None:
    """Delete the credential variables, and any variable holding a credential, from os.environ."""
    # A variable that merely contains a very short "secret" (a test value) is left alone.
    values = {value.strip() for value in secrets if len(value.strip()) >= 8}
    for name in list(os.environ):
        if name in SECRET_VARIABLES or any(v in os.environ[name] for v in values):
            del os.environ[name]


def _session(environ: dict[str, str], redact: Redactor, commands: WorkflowCommands,
             client_factory: ClientFactory, out: object, err: object) -> Session:
    inputs = ActionInputs.from_environ(environ)
    token = inputs.github_token or environ.get("GITHUB_TOKEN", "").strip()
    clean = {k: v for k, v in environ.items() if k not in SECRET_VARIABLES}
    return Session(clean, token, inputs, EventContext.from_environ(environ), commands, redact,
                   client_factory, out, err)  # type: ignore[arg-type]


def _action(session: Session, check: Check) -> int:
    if session.inputs.comment_from_report:
        report = inside(session.event.workspace, session.inputs.comment_from_report,
                        "comment-from-report")
        return publish_report_file(session, report)
    refuse_fork_code(session)
    workdir = inside(session.event.workspace, session.inputs.working_directory,
                     "working-directory")
    if not workdir.is_dir():
        raise InputError(
            f'input "working-directory" is "{session.inputs.working_directory}", which is not '
            f"a folder of the checked-out repository ({workdir}). Check out the repository "
            "first (actions/checkout) and name a folder that exists.")
    if session.inputs.requirements:
        install_requirements(session, inside(workdir, session.inputs.requirements,
                                             "requirements"), workdir)
    outcome = run_check(session, check, workdir)
    return publish_outcome(session, outcome)


# -- before the check ---------------------------------------------------------------------


def refuse_fork_code(session: Session) -> None:
    pr, event = session.event.pull_request, session.event
    if event.name != "pull_request_target" or pr is None or not pr.is_fork:
        return
    if not session.inputs.run_fork_code_with_write_token:
        raise ForkPolicyError(FORK_REFUSAL.format(
            number=pr.number, head=pr.head_repository or "(a deleted fork)",
            base=pr.base_repository))
    session.commands.annotate(Annotation(
        "warning", f"Running the code of fork {pr.head_repository or '(deleted)'} with a write "
        "token because run-fork-code-with-write-token is true.", title="onnx-parity: fork code"))


def inside(root: Path, raw: str, name: str) -> Path:
    """`raw` resolved against `root`, refused (naming input `name`) if it leads outside."""
    path = (root / raw).resolve()
    if not path.is_relative_to(root.resolve()):
        raise InputError(
            f'input "{name}" is "{raw}", which resolves to {path}, outside {root}. Give a path '
            "inside the repository, relative to its root.")
    return path


def install_requirements(session: Session, requirements: Path, workdir: Path) -> None:
    if not requirements.is_file():
        raise RequirementsError(
            f'input "requirements": {requirements} does not exist. Commit the file or fix the '
            "path (it is relative to working-directory).")
    with constraints_file(session.environ) as constraints:
        command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                   "--no-input", "-r", str(requirements), "-c", str(constraints)]
        result = subprocess.run(command, cwd=workdir, env=dict(session.environ), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    with session.commands.group(f"onnx-parity: pip install -r {requirements.name}"):
        session.commands.untrusted_text(result.stdout)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.strip().splitlines()[-PIP_TAIL_LINES:])
        raise RequirementsError(
            f'input "requirements": pip could not install {requirements.name} (exit code '
            f"{result.returncode}). torch, onnx, onnxruntime, onnxscript, numpy and protobuf "
            "are held at the versions in the image; remove or loosen a requirement that asks "
            f"for other versions. pip's last lines:\n{tail}")


@contextlib.contextmanager
def constraints_file(environ: Mapping[str, str]) -> Iterator[Path]:
    """$ONNX_PARITY_CONSTRAINTS if set, else the installed versions of PINNED_PACKAGES."""
    given = environ.get("ONNX_PARITY_CONSTRAINTS", "")
    if given:
        yield Path(given)
        return
    with tempfile.TemporaryDirectory(prefix="onnx-parity-") as folder:
        path = Path(folder) / "constraints.txt"
        path.write_text(installed_constraints(), encoding="utf-8")
        yield path


def installed_constraints() -> str:
    lines = []
    for name in PINNED_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            lines.append(f"{name}=={importlib.metadata.version(name)}")
    return "\n".join(lines) + "\n"


def run_check(session: Session, check: Check, workdir: Path) -> CheckOutcome:
    config = inside(workdir, session.inputs.config, "config") if session.inputs.config else None
    out_dir = inside(session.event.workspace, session.inputs.output_dir, "output-dir")
    request = CheckRequest(repo=workdir, config=config, out_dir=out_dir)
    with contextlib.chdir(workdir), contextlib.redirect_stdout(session.stdout), \
            contextlib.redirect_stderr(session.stderr):
        outcome = check(request)
    session.redact.folder(out_dir)
    for report in (outcome.report_json, outcome.report_markdown):
        session.redact.file(report)
    return outcome


# -- after the check ----------------------------------------------------------------------


def publish_outcome(session: Session, outcome: CheckOutcome) -> int:
    run = outcome.run
    print_logs(session.commands, run)
    for annotation in annotations(run, session.inputs.working_directory, session.event.run_url):
        session.commands.annotate(annotation)
    relative = _workspace_relative(session.event.workspace)
    outputs = publish_common(session, run, outcome.config_path, from_report=False)
    outputs |= {"report-json": relative(outcome.report_json),
                "report-markdown": relative(outcome.report_markdown)}
    return finish(session, run, outputs)


def print_logs(commands: WorkflowCommands, run: RunResult) -> None:
    for model in run.models:
        verdict = "passed" if model.passed else "FAILED"
        with commands.group(f"onnx-parity: {model.name} ({verdict})"):
            commands.untrusted_text(model.log or "(no log output)")


def annotations(run: RunResult, working_directory: str, run_url: str) -> list[Annotation]:
    """Up to ANNOTATION_CAP errors and warnings, then one notice counting the rest."""
    located = [(model, f) for model in run.models for f in model.findings
               if f.file and f.severity in (Severity.ERROR, Severity.WARNING)]
    chosen: list[Annotation] = []
    left_out = 0
    for level, severity in (("error", Severity.ERROR), ("warning", Severity.WARNING)):
        batch = [(m, f) for m, f in located if f.severity == severity]
        chosen += [finding_annotation(level, m, f, working_directory)
                   for m, f in batch[:ANNOTATION_CAP]]
        left_out += max(0, len(batch) - ANNOTATION_CAP)
    if left_out:
        chosen.append(Annotation(
            "notice", f"{left_out} more findings not annotated; see the summary: {run_url}",
            title="onnx-parity"))
    return chosen


def finding_annotation(level: str, model: ModelResult, finding: Finding,
                       working_directory: str) -> Annotation:
    path = posixpath.normpath(posixpath.join(working_directory, str(finding.file)))
    return Annotation(level, f"{finding.message}\nFix: {finding.suggested_fix}",
                      title=f"{finding.code} in {model.name}", file=path, line=finding.line)


def publish_common(session: Session, run: RunResult, config_path: str,
                   from_report: bool) -> dict[str, str]:
    """Summary and comment (both modes); returns the outputs known so far."""
    source_base = session.event.source_base(session.inputs.working_directory)
    render = _renderer(session, run, source_base, footer="")
    summary_file = session.environ.get("GITHUB_STEP_SUMMARY", "")
    if summary_file:
        write_summary(Path(summary_file), render, summary_pointer(session))
    url = post_comment(session, run, config_path, source_base, from_report)
    return {"passed": _bool(run.passed),
            "failed-models": ",".join(run.failed_models), "comment-url": url or ""}


def finish(session: Session, run: RunResult, outputs: dict[str, str]) -> int:
    output_file = session.environ.get("GITHUB_OUTPUT", "")
    if output_file:
        write_outputs(Path(output_file), {k: session.redact(v) for k, v in outputs.items()})
    passed = gate_passed(run, session.inputs.fail_on)
    failed = ", ".join(run.failed_models) or "none"
    session.commands.emit(f"onnx-parity: {len(run.models)} models, failed: {failed}; "
                          f"fail-on {session.inputs.fail_on.value}: "
                          f"{'pass' if passed else 'FAIL'}")
    return 0 if passed else 1


def gate_passed(run: RunResult, fail_on: FailOn) -> bool:
    """error: no error finding; warning: no error or warning finding; never: always passes."""
    failing = {FailOn.ERROR: {Severity.ERROR},
               FailOn.WARNING: {Severity.ERROR, Severity.WARNING},
               FailOn.NEVER: set()}[fail_on]
    return not any(f.severity in failing for model in run.models for f in model.findings)


def summary_pointer(session: Session) -> str:
    return (f"_The summary was cut to GitHub's 1 MiB limit. The whole report is `report.md` in "
            f"`{session.inputs.output_dir}`: upload that folder as an artifact to keep it._")


def comment_pointer(run_url: str) -> str:
    return (f"_This comment was cut to GitHub's {BODY_LIMIT:,}-character limit; the whole "
            f"report is in [the run's summary]({run_url})._")


def post_comment(session: Session, run: RunResult, config_path: str, source_base: str,
                 from_report: bool) -> str | None:
    number = _comment_target(session, from_report)
    if number is None:
        return None
    budget = BODY_LIMIT - len(comment_marker(config_path)) - 1
    footer = f"[Logs and the whole report: the run's summary]({session.event.run_url})"
    body = fit_markdown(_renderer(session, run, source_base, footer), budget, utf16_size,
                        comment_pointer(session.event.run_url)).text
    client = session.client_factory(session.event.api_url, session.token)
    outcome = upsert_comment(client, session.event.repository, number, config_path, body)
    if outcome.warning:
        session.commands.annotate(Annotation("warning", session.redact(outcome.warning),
                                             title="onnx-parity: PR comment"))
    return outcome.url


def _comment_target(session: Session, from_report: bool) -> int | None:
    """The PR to comment on, or None (with a notice when one was expected).

    A check comments on pull_request and pull_request_target events only; a report (the
    two-job mode) also on workflow_run, whose PR is looked up.
    """
    if not session.inputs.comment:
        return None
    if session.event.name not in PULL_REQUEST_EVENTS and not from_report:
        return None
    if not session.token:
        session.commands.annotate(Annotation(
            "warning", "No token: the PR comment was skipped. Pass `github-token` (the default "
            "is the workflow's token) and grant `pull-requests: write`.",
            title="onnx-parity: PR comment"))
        return None
    return resolve_pull_request(session)


def resolve_pull_request(session: Session) -> int | None:
    event = session.event
    if event.pull_request is not None:
        return event.pull_request.number
    if event.workflow_run is None:
        session.commands.annotate(Annotation(
            "notice", f"The {event.name} event names no pull request; no comment was posted.",
            title="onnx-parity: PR comment"))
        return None
    if event.workflow_run.pull_request_numbers:
        return event.workflow_run.pull_request_numbers[0]
    return pull_request_for_commit(session, event.workflow_run.head_sha)


def pull_request_for_commit(session: Session, sha: str) -> int | None:
    """workflow_run events of fork PRs list no PR: ask which open PR has this head commit."""
    client = session.client_factory(session.event.api_url, session.token)
    try:
        pulls = list(client.paginate(f"/repos/{session.event.repository}/commits/{sha}/pulls"))
    except GitHubError as error:
        pulls, reason = [], f"GitHub refused the look-up: {error}"
    else:
        reason = "GitHub lists no pull request with that head commit"
    for pull in pulls:
        if isinstance(pull, dict) and (pull.get("head") or {}).get("sha") == sha:
            return int(pull["number"])
    session.commands.annotate(Annotation(
        "warning", session.redact(f"No pull request found for commit {sha} ({reason}); no "
                                  "comment was posted."), title="onnx-parity: PR comment"))
    return None


def _renderer(session: Session, run: RunResult, source_base: str,
              footer: str) -> Callable[[int], str]:
    def render(detail: int) -> str:
        text = render_markdown(run, source_base=source_base, detail=detail, footer=footer)
        return session.redact(text)
    return render


def utf16_size(text: str) -> int:
    """GitHub counts a body's characters; UTF-16 units are never fewer, so the count is safe."""
    return len(text.encode("utf-16-le")) // 2


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _workspace_relative(workspace: Path) -> Callable[[Path], str]:
    """Paths for outputs: relative to the workspace, so later steps on the host can use them."""
    def relative(path: Path) -> str:
        try:
            return path.resolve().relative_to(workspace.resolve()).as_posix()
        except ValueError:
            return str(path)
    return relative


# -- the comment from a report (two-job mode for forks) ------------------------------------


def publish_report_file(session: Session, report: Path) -> int:
    """Post the comment for a report.json made elsewhere; no model runs."""
    run = load_report(report)
    outputs = publish_common(session, run, run.config_path, from_report=True)
    relative = _workspace_relative(session.event.workspace)
    outputs |= {"report-json": relative(report), "report-markdown": ""}
    return finish(session, run, outputs)


def load_report(path: Path) -> RunResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return run_from_json(data)
    except OSError as error:
        raise ReportError(
            f"cannot read the report {path} ({error.strerror or error}). Download the check "
            "job's artifact first and give the path of its report.json.") from None
    except ValueError as error:  # not JSON at all
        raise ReportError(
            f"{path} is not JSON ({error}). Give the report.json that `onnx-parity check` or "
            "the action wrote.") from None
    except ReportFormatError as error:
        raise ReportError(f"{path}: {error}") from None
