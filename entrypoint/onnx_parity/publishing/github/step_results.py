"""What the step leaves behind: the job summary, the outputs, and the gate's exit code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from onnx_parity.errors import ExitCode
from onnx_parity.publishing.github.commands import write_outputs, write_summary
from onnx_parity.publishing.github.pr_comment import post_comment
from onnx_parity.publishing.github.session import Session
from onnx_parity.report import FailOn, gate
from onnx_parity.results import RunResult


def publish_common(session: Session, run: RunResult, config_path: str,
                   from_report: bool) -> dict[str, str]:
    """Summary and comment (both modes); returns the outputs known so far."""
    source_base = session.event.source_base(session.inputs.working_directory)
    render = session.renderer(run, source_base, footer="")
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
    return ExitCode.PASSED if passed else ExitCode.FAILED


def gate_passed(run: RunResult, fail_on: FailOn) -> bool:
    """The rule lives in report/gate.py, where `check --fail-on` reads it too."""
    return gate.gate_passed(run, fail_on)


def summary_pointer(session: Session) -> str:
    return (f"_The summary was cut to GitHub's 1 MiB limit. The whole report is `report.md` in "
            f"`{session.inputs.output_dir}`: upload that folder as an artifact to keep it._")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def workspace_relative(workspace: Path) -> Callable[[Path], str]:
    """Paths for outputs: relative to the workspace, so later steps on the host can use them."""
    def relative(path: Path) -> str:
        try:
            return path.resolve().relative_to(workspace.resolve()).as_posix()
        except ValueError:
            return str(path)
    return relative
