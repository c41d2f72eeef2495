"""`onnx-parity init`: a model and no configuration to a checked `[[model]]` entry."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from onnx_parity.commands.check import perform_check
from onnx_parity.commands.usage import UsageError
from onnx_parity.errors import ExitCode


def run_init_command(args: argparse.Namespace) -> int:
    from onnx_parity.publishing.init_command import InitStreams, run_init
    from onnx_parity.settings.init_request import new_model, weights_option

    if not args.repo.is_dir():
        raise UsageError(f"--repo {args.repo}: no such folder. Fix: pass the repository root.")
    repo = args.repo.resolve()
    model = new_model(args.factory, args.input, args.dynamic, args.name, args.samples,
                      weights_option(repo, args.weights))

    def check(config: Path, name: str) -> int:
        done = perform_check(repo, config, args.out, [name], 1, sys.stdout)
        return ExitCode.PASSED if done.run.passed else ExitCode.FAILED

    return run_init(model, repo, args.config, args.force, os.environ, check,
                    InitStreams(sys.stdout, sys.stderr))
