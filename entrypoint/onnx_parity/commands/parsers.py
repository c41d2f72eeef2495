"""The parsers of every command: options, their defaults and their help (README documents them).

Kept free of heavy imports: `onnx-parity --help` must answer at once.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TypeAlias

from onnx_parity import __version__

FAIL_ON_CHOICES = ("error", "warning", "never", "regression")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnx-parity",
        description="Export the PyTorch models a repository declares to ONNX and check that "
        "onnxruntime matches PyTorch on committed samples.",
    )
    parser.add_argument("--version", action="version", version=f"onnx-parity {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _check_parser(commands)
    add_init_parser(commands)
    commands.add_parser("action", help="what the GitHub Action container runs (reads INPUT_*)")
    comment = commands.add_parser("comment", help="post the PR comment from a report.json "
                                  "(two-job mode for fork pull requests)")
    comment.add_argument("--report", type=Path, required=True, help="path of report.json")
    merge = commands.add_parser("merge", help="merge the report.json of every shard into one "
                                "report (exit 0/1/2)")
    merge.add_argument("--out", type=Path, required=True, help="folder for report.json and "
                       "report.md")
    merge.add_argument("reports", type=Path, nargs="+", metavar="REPORT",
                       help="each shard's report.json")
    _fail_on_option(merge)
    return parser


# A string: argparse's class takes no subscript at run time, only for the type checker.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _check_parser(commands: Commands) -> None:
    check = commands.add_parser("check", help="check the models of a repository (exit 0/1/2)")
    check.add_argument("--repo", type=Path, default=Path("."),
                       help="repository root (default: current folder)")
    check.add_argument("--config", type=Path, default=None,
                       help="configuration file (default: onnx-parity.toml, then "
                       "[tool.onnx-parity] in pyproject.toml)")
    check.add_argument("--out", type=Path, default=Path("onnx-parity-out"),
                       help="output folder (default: onnx-parity-out)")
    check.add_argument("--model", action="append", default=[], metavar="NAME",
                       help="check only this model (repeatable)")
    check.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                       help="models checked in parallel (default: number of cores)")
    check.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    check.add_argument("--cache", type=Path, default=None, metavar="DIR",
                       help="reuse the results of unchanged models from DIR, and keep new ones "
                       "there (default: no cache)")
    check.add_argument("--no-cache", action="store_true",
                       help="check every model again (fresh results still go to --cache)")
    check.add_argument("--shard", default=None, metavar="K/N",
                       help="check only the K-th of N deterministic parts of the models")
    check.add_argument("--baseline", type=Path, default=None, metavar="REPORT",
                       help="compare with this report.json (the base branch's): the vs base "
                       "column, drift-regression, fail-on regression")
    _fail_on_option(check)


def _fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-on", choices=FAIL_ON_CHOICES, default="error",
                        help="exit 1 on: error findings (default), warnings too, never, or "
                        "regression (errors the --baseline did not have)")


def add_init_parser(commands: Commands) -> None:
    init = commands.add_parser(
        "init", help="add a model to the configuration (creating it), write its samples, "
        "check it", description="Build the model in a worker, check the inputs against its "
        "forward, write samples under samples/, append a [[model]] entry to the configuration "
        "and check that model. Exit code: the check's (0/1), or 2 when nothing could be added.")
    init.add_argument("--factory", required=True, metavar="MODULE:CALLABLE",
                      help="what returns the nn.Module, importable from the repository root")
    init.add_argument("--input", action="append", default=[], metavar="SPEC",
                      help="a parameter of forward: NAME=SHAPE[:DTYPE[:LOW-HIGH]], e.g. "
                      "input=1x3x224x224 or ids=2x16:int64:0-30522 (axis 0: samples; "
                      "repeatable; with --samples, NAME alone is enough)")
    init.add_argument("--dynamic", action="append", default=[], metavar="INPUT:AXIS=NAME",
                      help="an axis that must stay variable, e.g. input:0=batch (repeatable; "
                      "default: axis 0 of every input, named batch)")
    init.add_argument("--name", default=None,
                      help="the model's name (default: the factory's module, e.g. net)")
    init.add_argument("--samples", default=None, metavar="MODULE:FUNCTION",
                      help="a function returning real, preprocessed inputs (recommended; "
                      "default: seeded random data of each --input's shape)")
    init.add_argument("--weights", default=None, metavar="PATH",
                      help="a state_dict file for the model, inside the repository")
    init.add_argument("--repo", type=Path, default=Path("."),
                      help="repository root (default: current folder)")
    init.add_argument("--config", type=Path, default=None,
                      help="configuration file to add to (default: onnx-parity.toml, or "
                      "pyproject.toml when it has [tool.onnx-parity]; created if missing)")
    init.add_argument("--out", type=Path, default=Path("onnx-parity-out"),
                      help="output folder of the check (default: onnx-parity-out)")
    init.add_argument("--force", action="store_true",
                      help="replace a model of the same name and overwrite its sample files")
