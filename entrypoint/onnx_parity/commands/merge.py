"""`onnx-parity merge`: every shard's report.json into one report, and the gate's exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity.commands.check import CheckRun, footer
from onnx_parity.errors import ExitCode

if TYPE_CHECKING:
    from onnx_parity.publishing.github.action import CheckOutcome, MergeRequest
    from onnx_parity.results import RunResult


def perform_merge(reports: Sequence[Path], out: Path, stream: TextIO,
                  source_root: str = "") -> CheckRun:
    """Shard reports -> one report.json and report.md; raises MergeError (exit 2)."""
    from onnx_parity.publishing.files import prepare_output, read_report, write_report
    from onnx_parity.report.console_text import verdict_table
    from onnx_parity.report.markdown import render_markdown
    from onnx_parity.report.merging import merge_runs

    runs = [(path.as_posix(), read_report(path, "shard report")) for path in reports]
    run = merge_runs(runs)
    prepare_output(out)
    shards = runs[0][1].shard.count if runs[0][1].shard else len(runs)
    markdown = render_markdown(run, footer=f"{footer(run.versions)} · merged from {shards} shards")
    written = write_report(run, markdown, out, source_root)
    stream.write(verdict_table(run))
    stream.write(f"report: {written.report_markdown}\n")
    return CheckRun(run, written, run.config_path)


def gate_code(run: RunResult, fail_on: str) -> int:
    from onnx_parity.report.gate import FailOn, gate_passed

    return ExitCode.PASSED if gate_passed(run, FailOn(fail_on)) else ExitCode.FAILED


def merge_for_action(request: MergeRequest) -> CheckOutcome:
    """`onnx-parity merge` as the action's `merge-reports` mode calls it."""
    from onnx_parity.publishing.github.action import CheckOutcome

    done = perform_merge(request.reports, request.out_dir, sys.stdout, request.source_root)
    return CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown,
                        report_sarif=done.written.report_sarif,
                        report_junit=done.written.report_junit)
