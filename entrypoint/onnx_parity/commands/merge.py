"""`onnx-parity merge`: every shard's report.json into one report, and the gate's exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity.commands.check import CheckRun, footer, gate_code, outcome_of
from onnx_parity.commands.context import Context

if TYPE_CHECKING:
    from onnx_parity.publishing import CheckOutcome, MergeRequest


def merge_command(args: argparse.Namespace, context: Context) -> int:
    return gate_code(perform_merge(args.reports, args.out, context.stdout).run, args.fail_on)


def perform_merge(reports: Sequence[Path], out: Path, stream: TextIO,
                  source_root: str = "") -> CheckRun:
    """Shard reports -> one report.json and report.md; raises MergeError (exit 2)."""
    from onnx_parity.publishing import prepare_output, read_report, write_report
    from onnx_parity.report import merge_runs, render_markdown, verdict_table

    runs = [(path.as_posix(), read_report(path, "shard report")) for path in reports]
    run = merge_runs(runs)
    prepare_output(out)
    shards = runs[0][1].shard.count if runs[0][1].shard else len(runs)
    markdown = render_markdown(run, footer=f"{footer(run.versions)} · merged from {shards} shards")
    written = write_report(run, markdown, out, source_root)
    stream.write(verdict_table(run))
    stream.write(f"report: {written.report_markdown}\n")
    return CheckRun(run, written, run.config_path)


def merge_for_action(request: MergeRequest) -> CheckOutcome:
    """`onnx-parity merge` as the action's `merge-reports` mode calls it."""
    # sys.stdout as it is now: the action has redirected it into its redacting writer.
    return outcome_of(perform_merge(request.reports, request.out_dir, sys.stdout,
                                    request.source_root))
