"""The action's step, its GitHub pieces: the engine's requests and outcomes, and publishing them.

The order of the step (guard, inputs, preflight, check or merge, publish, exit code) is
commands/action.py's; this module holds what it calls that speaks GitHub:
- `CheckRequest`/`CheckOutcome`/`MergeRequest`: what the step hands the engine (`check` and
  `merge`, commands/check.py and commands/merge.py) and gets back;
- `run_check`: the inputs as a request, the check run in `working-directory` with its output
  redacted; `run_merge`: `merge-reports` (paths or globs, `merge_inputs`) the same way;
- `publish_outcome`: logs, annotations, summary, comment and outputs of a check or merge;
  `publish_report_file`: the same for a report.json made elsewhere (`comment-from-report`
  and the `comment` command), read by `load_report`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.publishing.github.annotations import finding_annotations, print_logs
from onnx_parity.publishing.github.inputs import InputError
from onnx_parity.publishing.github.preflight import inside
from onnx_parity.publishing.github.session import Session
from onnx_parity.publishing.github.step_results import finish, publish_common, workspace_relative
from onnx_parity.report import ReportFormatError, run_from_json
from onnx_parity.results import RunResult


@dataclass(frozen=True)
class CheckRequest:
    repo: Path  # the working directory: the repository as the configuration sees it
    config: Path | None  # None: the engine's default file in `repo`
    out_dir: Path
    # `repo` relative to the workspace (the repository root): report.sarif's path prefix.
    source_root: str = ""
    cache_dir: Path | None = None
    shard: str | None = None  # "K/N"
    baseline: Path | None = None


@dataclass(frozen=True)
class CheckOutcome:
    run: RunResult
    config_path: str  # relative to `repo`, as the comment marker names it
    report_json: Path
    report_markdown: Path
    report_sarif: Path | None = None
    report_junit: Path | None = None


@dataclass(frozen=True)
class MergeRequest:
    reports: tuple[Path, ...]  # every shard's report.json
    out_dir: Path
    source_root: str = ""  # working-directory: the prefix of report.sarif's paths


Check = Callable[[CheckRequest], CheckOutcome]
Merge = Callable[[MergeRequest], CheckOutcome]


def run_check(session: Session, check: Check, workdir: Path) -> CheckOutcome:
    config = inside(workdir, session.inputs.config, "config") if session.inputs.config else None
    out_dir = inside(session.event.workspace, session.inputs.output_dir, "output-dir")
    inputs = session.inputs
    cache = inside(session.event.workspace, inputs.cache_dir, "cache-dir") if inputs.cache_dir \
        else None
    baseline = inside(session.event.workspace, inputs.baseline_report, "baseline-report") \
        if inputs.baseline_report else None
    within = workspace_relative(session.event.workspace)(workdir)
    request = CheckRequest(repo=workdir, config=config, out_dir=out_dir, cache_dir=cache,
                           shard=inputs.shard.label if inputs.shard else None, baseline=baseline,
                           source_root="" if within == "." else within)
    with contextlib.chdir(workdir), contextlib.redirect_stdout(session.stdout), \
            contextlib.redirect_stderr(session.stderr):
        outcome = check(request)
    session.redact.folder(out_dir)
    for report in written_reports(outcome):
        session.redact.file(report)
    return outcome


def written_reports(outcome: CheckOutcome) -> list[Path]:
    """The report files a check or merge wrote (SARIF and JUnit when it wrote them)."""
    return [report for report in (outcome.report_json, outcome.report_markdown,
                                  outcome.report_sarif, outcome.report_junit)
            if report is not None]


def run_merge(session: Session, merge: Merge) -> CheckOutcome:
    """`merge-reports`: the shards' reports into output-dir, printed and redacted like a check."""
    out_dir = inside(session.event.workspace, session.inputs.output_dir, "output-dir")
    reports = merge_inputs(session.event.workspace, session.inputs.merge_reports or "")
    with contextlib.redirect_stdout(session.stdout), contextlib.redirect_stderr(session.stderr):
        working = session.inputs.working_directory.strip("/")
        outcome = merge(MergeRequest(reports, out_dir, "" if working in ("", ".") else working))
    for report in written_reports(outcome):
        session.redact.file(report)
    return outcome


def publish_outcome(session: Session, outcome: CheckOutcome, logs: bool = True) -> int:
    run = outcome.run
    if logs:
        print_logs(session.commands, run)
    located = finding_annotations(run, session.inputs.working_directory, session.event.run_url)
    for annotation in located if run.shard is None else ():  # the merging job annotates
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


def merge_inputs(workspace: Path, patterns: str) -> tuple[Path, ...]:
    """`merge-reports`: paths or globs (relative to the workspace), each matching a file."""
    found: list[Path] = []
    for pattern in patterns.split():
        inside(workspace, pattern, "merge-reports")  # no `..` out of the workspace
        matches = sorted(workspace.glob(pattern)) if any(c in pattern for c in "*?[") else \
            [workspace / pattern]
        files = [inside(workspace, path.relative_to(workspace).as_posix(), "merge-reports")
                 for path in matches if path.is_file()]
        if not files:
            raise InputError(
                f'input "merge-reports": "{pattern}" matches no file in the workspace. Download '
                "every shard's report first (actions/download-artifact) and give their paths "
                "or a glob such as shards/*/report.json.")
        found += files
    return tuple(dict.fromkeys(found))
