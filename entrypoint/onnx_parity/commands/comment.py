"""`onnx-parity comment --report report.json`: post the sticky comment for a finished check.

The same path as the action's `comment-from-report` input, for workflows that run the check
with `onnx-parity check` themselves: no model runs, the report is read, the pull request is
resolved from the event (the `workflow_run` payload, or the commit's pull requests), and the
comment is created or updated. The token comes from the `github-token` input when run by the
action, else from `GITHUB_TOKEN`. The exit code follows `fail-on` (INPUT_FAIL-ON, default
"error") applied to the report's findings; 2 when the report or the environment is unusable.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_parity.commands.context import Context

if TYPE_CHECKING:  # the GitHub modules load only when the command runs: --help stays fast
    from onnx_parity.publishing import ClientFactory, Writer


def comment_command(args: argparse.Namespace, context: Context) -> int:
    # No stderr handed in: this command has always written its errors to stdout as well.
    return run_comment_command(args.report, context.environ, context.client_factory,
                               context.stdout)


def run_comment_command(report: Path, environ: Mapping[str, str],
                        client_factory: ClientFactory, stdout: Writer,
                        stderr: Writer | None = None) -> int:
    """Publish `report` as the PR comment; returns the exit code (0, 1 per fail-on, or 2)."""
    from onnx_parity.publishing import guarded, publish_report_file

    return guarded(environ, client_factory, stdout, stderr or stdout,
                   lambda session: publish_report_file(session, report))
