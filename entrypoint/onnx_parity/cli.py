"""The `onnx-parity` command: builds the real things (paths, clients, workers) and wires stages.

Kept light on imports so `--help` answers at once: torch is only ever imported by the workers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity import __version__
from onnx_parity.errors import ExitCode, UserError, exit_code_for

if TYPE_CHECKING:  # the real imports stay inside the functions: --help must not load them
    from onnx_parity.publishing.files import WrittenReport
    from onnx_parity.publishing.github.action import CheckOutcome, CheckRequest
    from onnx_parity.publishing.github.http import GitHubClient
    from onnx_parity.results import RunResult
    from onnx_parity.settings.schema import ModelSpec


class UsageError(UserError):
    """The command line asks for something that cannot be done."""

    title = "command line"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnx-parity",
        description="Export the PyTorch models a repository declares to ONNX and check that "
        "onnxruntime matches PyTorch on committed samples.",
    )
    parser.add_argument("--version", action="version", version=f"onnx-parity {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
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
    add_init_parser(commands)
    commands.add_parser("action", help="what the GitHub Action container runs (reads INPUT_*)")
    comment = commands.add_parser("comment", help="post the PR comment from a report.json "
                                  "(two-job mode for fork pull requests)")
    comment.add_argument("--report", type=Path, required=True, help="path of report.json")
    return parser


def add_init_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _init(args: argparse.Namespace) -> int:
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


@dataclass(frozen=True)
class CheckRun:
    run: RunResult
    written: WrittenReport
    config_path: str


def perform_check(repo: Path, config: Path | None, out: Path, models: Sequence[str], jobs: int,
                  stream: TextIO, environ: dict[str, str] | None = None,
                  source_root: str | None = None) -> CheckRun:
    """Settings -> engine -> report -> files; raises ConfigError/UsageError for bad input.

    `source_root`: `repo` relative to the repository root, for report.sarif (None: found from
    the enclosing git checkout).
    """
    from onnx_parity.pipeline.all_models import run_models
    from onnx_parity.publishing.console import divergence_lines, open_console, verdict_table
    from onnx_parity.publishing.files import prepare_output, write_outputs
    from onnx_parity.report.markdown import render_markdown
    from onnx_parity.settings.loading import load_settings
    from onnx_parity.settings.source_root import source_root as enclosing_checkout

    if not repo.is_dir():
        raise UsageError(f"--repo {repo}: no such folder. Fix: pass the repository root.")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1.")
    settings = load_settings(repo.resolve(), config)
    specs = _selected(settings.models, models, settings.relative(settings.config_path))
    prepare_output(out)
    workdir = Path(tempfile.mkdtemp(prefix="onnx-parity-"))
    environment = dict(environ or os.environ)
    view = open_console(stream, environment, [spec.name for spec in specs],
                        settings.relative(settings.config_path))
    try:
        with view:
            run = run_models(settings, specs, workdir, jobs, environment, view.event,
                             view.model_done)
        markdown = render_markdown(run, footer=footer(run.versions))
        prefix = enclosing_checkout(repo) if source_root is None else source_root
        written = write_outputs(run, markdown, out, prefix)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stream.write("\n" + verdict_table(run))
    stream.write(divergence_lines(run))
    stream.write(f"report: {written.report_markdown}\n")
    return CheckRun(run, written, run.config_path)


def _selected(specs: tuple[ModelSpec, ...], names: Sequence[str],
              config: str) -> tuple[ModelSpec, ...]:
    if not names:
        return specs
    known = [spec.name for spec in specs]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"--model {unknown[0]}: no model of that name in {config} "
                         f"(models: {', '.join(known)}). Fix: use one of those names.")
    return tuple(spec for spec in specs if spec.name in names)


def footer(versions: dict[str, str]) -> str:
    shown = ("onnx-parity", "torch", "onnxruntime", "onnx", "onnxscript")
    return " · ".join(f"{name} {versions.get(name, '?')}" for name in shown)


def check_for_action(request: CheckRequest) -> CheckOutcome:
    """The engine as the GitHub Action calls it (see publishing/github/action.py)."""
    from onnx_parity.publishing.github.action import CheckOutcome

    done = perform_check(request.repo, request.config, request.out_dir, (),
                         os.cpu_count() or 1, sys.stdout, source_root=request.source_root)
    return CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown,
                        report_sarif=done.written.report_sarif,
                        report_junit=done.written.report_junit)


def _client_factory(api_url: str, token: str) -> GitHubClient:
    from onnx_parity.publishing.github.http import GitHubClient

    return GitHubClient(api_url, token)


def _command(args: argparse.Namespace) -> int:
    if args.command == "check":
        done = perform_check(args.repo, args.config, args.out, args.model, args.jobs, sys.stdout)
        return ExitCode.PASSED if done.run.passed else ExitCode.FAILED
    if args.command == "init":
        return _init(args)
    if args.command == "action":
        from onnx_parity.publishing.github.action import run_action

        return run_action(os.environ, check=check_for_action, client_factory=_client_factory,
                          stdout=sys.stdout, stderr=sys.stderr)
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
