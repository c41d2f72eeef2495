"""`onnx-parity action`: the engine wrapped for a GitHub Actions step.

Order matters and is the point of this module (each step lives in the module named):
1. session.guarded: `::add-mask::` for the token first, credentials out of `os.environ`,
   every byte written afterwards redacted; UserError -> exit 2, a bug -> exit 3.
2. Inputs and the event are read (inputs.py, event.py); a bad input stops here (exit 2).
3. preflight: a fork's code under `pull_request_target` is refused unless opted in; the
   `requirements` are installed under constraints that keep torch and onnxruntime in place.
4. The check runs in `working-directory`; then logs (folded) and annotations (annotations.py),
   the summary, the sticky comment (pr_comment.py) and the outputs (step_results.py).
5. The exit code: 1 when the gate (`fail-on`) fails, else 0.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.publishing.github.annotations import finding_annotations, print_logs
from onnx_parity.publishing.github.commands import Writer
from onnx_parity.publishing.github.inputs import InputError
from onnx_parity.publishing.github.preflight import inside, install_requirements, refuse_fork_code
from onnx_parity.publishing.github.session import ClientFactory, Session, guarded
from onnx_parity.publishing.github.step_results import finish, publish_common, workspace_relative
from onnx_parity.report.serialization import ReportFormatError, run_from_json
from onnx_parity.results import RunResult


@dataclass(frozen=True)
class CheckRequest:
    repo: Path  # the working directory: the repository as the configuration sees it
    config: Path | None  # None: the engine's default file in `repo`
    out_dir: Path
    # `repo` relative to the workspace (the repository root): report.sarif's path prefix.
    source_root: str = ""


@dataclass(frozen=True)
class CheckOutcome:
    run: RunResult
    config_path: str  # relative to `repo`, as the comment marker names it
    report_json: Path
    report_markdown: Path
    report_sarif: Path | None = None
    report_junit: Path | None = None


Check = Callable[[CheckRequest], CheckOutcome]


def run_action(environ: Mapping[str, str], *, check: Check, client_factory: ClientFactory,
               stdout: Writer, stderr: Writer) -> int:
    """The whole action step; returns the exit code."""
    return guarded(environ, client_factory, stdout, stderr,
                   lambda session: _action(session, check))


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


def run_check(session: Session, check: Check, workdir: Path) -> CheckOutcome:
    config = inside(workdir, session.inputs.config, "config") if session.inputs.config else None
    out_dir = inside(session.event.workspace, session.inputs.output_dir, "output-dir")
    within = workspace_relative(session.event.workspace)(workdir)
    request = CheckRequest(repo=workdir, config=config, out_dir=out_dir,
                           source_root="" if within == "." else within)
    with contextlib.chdir(workdir), contextlib.redirect_stdout(session.stdout), \
            contextlib.redirect_stderr(session.stderr):
        outcome = check(request)
    session.redact.folder(out_dir)
    for report in (outcome.report_json, outcome.report_markdown, outcome.report_sarif,
                   outcome.report_junit):
        if report is not None:
            session.redact.file(report)
    return outcome


def publish_outcome(session: Session, outcome: CheckOutcome) -> int:
    run = outcome.run
    print_logs(session.commands, run)
    located = finding_annotations(run, session.inputs.working_directory, session.event.run_url)
    for annotation in located:
        session.commands.annotate(annotation)
    relative = workspace_relative(session.event.workspace)
    outputs = publish_common(session, run, outcome.config_path, from_report=False)
    outputs |= {"report-json": relative(outcome.report_json),
                "report-markdown": relative(outcome.report_markdown),
                **ci_report_outputs(outcome, relative)}
    return finish(session, run, outputs)


def ci_report_outputs(outcome: CheckOutcome, relative: Callable[[Path], str]) -> dict[str, str]:
    """`report-sarif` and `report-junit`: paths for the upload steps (empty: not written)."""
    return {"report-sarif": relative(outcome.report_sarif) if outcome.report_sarif else "",
            "report-junit": relative(outcome.report_junit) if outcome.report_junit else ""}


def publish_report_file(session: Session, report: Path) -> int:
    """Post the comment for a report.json made elsewhere; no model runs."""
    run = load_report(report)
    outputs = publish_common(session, run, run.config_path, from_report=True)
    relative = workspace_relative(session.event.workspace)
    outputs |= {"report-json": relative(report), "report-markdown": "", "report-sarif": "",
                "report-junit": ""}
    return finish(session, run, outputs)


def load_report(path: Path) -> RunResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return run_from_json(data)
    except OSError as error:
        raise ReportFormatError(
            f"cannot read the report {path} ({error.strerror or error}). Download the check "
            "job's artifact first and give the path of its report.json.") from None
    except ValueError as error:  # not JSON at all
        raise ReportFormatError(
            f"{path} is not JSON ({error}). Give the report.json that `onnx-parity check` or "
            "the action wrote.") from None
    except ReportFormatError as error:
        raise ReportFormatError(f"{path}: {error}") from None
