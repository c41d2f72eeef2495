"""The `onnx-parity` command: parses the command line, runs the command, maps errors to exit codes.

Kept light on imports so `--help` answers at once: torch is only ever imported by the workers.
What each command does is in commands/ (check, merge, init); the parsers in commands/parsers.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import TYPE_CHECKING

from onnx_parity.commands.parsers import build_parser
from onnx_parity.errors import ExitCode, exit_code_for

if TYPE_CHECKING:
    from onnx_parity.publishing.github.http import GitHubClient


def _client_factory(api_url: str, token: str) -> GitHubClient:
    from onnx_parity.publishing.github.http import GitHubClient

    return GitHubClient(api_url, token)


def _command(args: argparse.Namespace) -> int:
    from onnx_parity.commands.check import CheckOptions, check_for_action, perform_check
    from onnx_parity.commands.merge import gate_code, merge_for_action, perform_merge

    if args.command == "check":
        options = CheckOptions(cache=args.cache, read_cache=not args.no_cache, shard=args.shard,
                               baseline=args.baseline)
        done = perform_check(args.repo, args.config, args.out, args.model, args.jobs, sys.stdout,
                             options=options)
        return gate_code(done.run, args.fail_on)
    if args.command == "merge":
        return gate_code(perform_merge(args.reports, args.out, sys.stdout).run, args.fail_on)
    if args.command == "init":
        from onnx_parity.commands.init import run_init_command

        return run_init_command(args)
    if args.command == "action":
        from onnx_parity.publishing.github.action import run_action

        return run_action(os.environ, check=check_for_action, client_factory=_client_factory,
                          stdout=sys.stdout, stderr=sys.stderr, merge=merge_for_action)
    from onnx_parity.publishing.github.comment_command import run_comment_command

    return run_comment_command(args.report, os.environ, _client_factory, sys.stdout)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _command(args)
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
