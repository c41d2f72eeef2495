"""`onnx-parity action`: the engine wrapped for a GitHub Actions step (what the container runs).

Order matters and is the point of this module (each step lives in the module named, under
publishing/github/):
1. session.guarded: `::add-mask::` for the token first, credentials out of `os.environ`,
   every byte written afterwards redacted; UserError -> exit 2, a bug -> exit 3.
2. Inputs and the event are read (inputs.py, event.py); a bad input stops here (exit 2).
3. preflight: a fork's code under `pull_request_target` is refused unless opted in; the
   `requirements` are installed under constraints that keep torch and onnxruntime in place.
4. The check runs in `working-directory` (action.py's run_check); then logs (folded) and
   annotations (annotations.py), the summary, the sticky comment (pr_comment.py) and the
   outputs (step_results.py).
5. The exit code: 1 when the gate (`fail-on`) fails, else 0.

Two more shapes of the same step: with `shard` the check covers one part of the models and
posts no comment and no annotations (the merging job does); with `merge-reports` no model
runs: the shards' reports are merged (the `merge` command's work, handed in like the check)
and published like one check. With `comment-from-report` a report made elsewhere is posted.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_parity.commands.context import Context

if TYPE_CHECKING:  # the GitHub modules load only when the command runs: --help stays fast
    from onnx_parity.publishing import Check, ClientFactory, Merge, Session, Writer


def action_command(_args: argparse.Namespace, context: Context) -> int:
    """The step as the container runs it: every option comes from INPUT_* (`_args` has none)."""
    from onnx_parity.commands.check import check_for_action
    from onnx_parity.commands.merge import merge_for_action

    return run_action(context.environ, check=check_for_action,
                      client_factory=context.client_factory, stdout=context.stdout,
                      stderr=context.stderr, merge=merge_for_action)


def run_action(environ: Mapping[str, str], *, check: Check, client_factory: ClientFactory,
               stdout: Writer, stderr: Writer, merge: Merge | None = None) -> int:
    """The whole action step; returns the exit code."""
    from onnx_parity.publishing import guarded

    return guarded(environ, client_factory, stdout, stderr,
                   lambda session: _action(session, check, merge))


def _action(session: Session, check: Check, merge: Merge | None) -> int:
    from onnx_parity.publishing import inside, publish_report_file

    if session.inputs.merge_reports:
        return _merge_mode(session, merge)
    if session.inputs.comment_from_report:
        report = inside(session.event.workspace, session.inputs.comment_from_report,
                        "comment-from-report")
        return publish_report_file(session, report)
    return _check_mode(session, check)


def _merge_mode(session: Session, merge: Merge | None) -> int:
    from onnx_parity.publishing import InputError, publish_outcome, run_merge

    if merge is None:  # a caller that cannot merge must not run the check instead
        raise InputError('input "merge-reports" is set, but this entry point cannot merge '
                         "reports. Run the action (`onnx-parity action`).")
    return publish_outcome(session, run_merge(session, merge), logs=False)


def _check_mode(session: Session, check: Check) -> int:
    from onnx_parity.publishing import (
        inside,
        install_requirements,
        publish_outcome,
        refuse_fork_code,
        run_check,
    )

    refuse_fork_code(session)
    workdir = _working_directory(session)
    if session.inputs.requirements:
        install_requirements(session, inside(workdir, session.inputs.requirements,
                                             "requirements"), workdir)
    return publish_outcome(session, run_check(session, check, workdir))


def _working_directory(session: Session) -> Path:
    """`working-directory` inside the workspace, and a folder of the checkout."""
    from onnx_parity.publishing import InputError, inside

    workdir = inside(session.event.workspace, session.inputs.working_directory,
                     "working-directory")
    if not workdir.is_dir():
        raise InputError(
            f'input "working-directory" is "{session.inputs.working_directory}", which is not '
            f"a folder of the checked-out repository ({workdir}). Check out the repository "
            "first (actions/checkout) and name a folder that exists.")
    return workdir
