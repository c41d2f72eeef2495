"""The `onnx-parity` command: parses the command line, runs the command, maps errors to exit codes.

Kept light on imports so `--help` answers at once: torch is only ever imported by the workers,
and each command imports the stages it needs when it runs. The real outside world (the
environment, the streams, the GitHub client) is built here, once, and handed to the command.
What each command does is in commands/, one module each; the parsers in commands/parsers.py.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import TYPE_CHECKING

from onnx_parity.commands.action import action_command
from onnx_parity.commands.check import check_command
from onnx_parity.commands.comment import comment_command
from onnx_parity.commands.context import Context, Handler
from onnx_parity.commands.init import init_command
from onnx_parity.commands.merge import merge_command
from onnx_parity.commands.parsers import build_parser
from onnx_parity.errors import ExitCode, exit_code_for

if TYPE_CHECKING:
    from onnx_parity.publishing import GitHubClient

# Every command the parser knows (commands/parsers.py), by name.
COMMANDS: dict[str, Handler] = {
    "check": check_command,
    "merge": merge_command,
    "init": init_command,
    "action": action_command,
    "comment": comment_command,
}


def _client_factory(api_url: str, token: str) -> GitHubClient:
    from onnx_parity.publishing import GitHubClient

    return GitHubClient(api_url, token)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    context = Context(os.environ, sys.stdout, sys.stderr, _client_factory)
    try:
        return COMMANDS[args.command](args, context)
    except Exception as error:
        return _report_error(error, getattr(args, "debug", False))


def _report_error(error: Exception, debug: bool) -> int:
    code = exit_code_for(error)
    if code == ExitCode.INVALID:
        print(f"onnx-parity: {error}", file=sys.stderr)
        return code
    if debug:
        traceback.print_exc()
    print(f"onnx-parity: internal error: {type(error).__name__}: {error}. Re-run with --debug "
          "for the traceback and please report it.", file=sys.stderr)
    return code
