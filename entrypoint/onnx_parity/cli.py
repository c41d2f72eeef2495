"""The `onnx-parity` command: builds the real things (paths, clients, workers) and wires stages.

Kept light on imports so `--help` answers at once: torch is only ever imported by the workers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity import __version__
from onnx_parity.errors import ExitCode, UserError, exit_code_for

if TYPE_CHECKING:  # the real imports stay inside the functions: --help must not load them
    from onnx_parity.pipeline.cache.entries import ModelCache
    from onnx_parity.publishing.files import WrittenReport
    from onnx_parity.publishing.github.action import CheckOutcome, CheckRequest, MergeRequest
    from onnx_parity.publishing.github.http import GitHubClient
    from onnx_parity.results import Provenance, RunResult, Shard
    from onnx_parity.settings.schema import ModelSpec, Settings

FAIL_ON_CHOICES = ("error", "warning", "never", "regression")


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


def _fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-on", choices=FAIL_ON_CHOICES, default="error",
                        help="exit 1 on: error findings (default), warnings too, never, or "
                        "regression (errors the --baseline did not have)")


@dataclass(frozen=True)
class CheckOptions:
    """What `check` does beyond running the models: cache, shard, baseline."""

    cache: Path | None = None
    read_cache: bool = True  # False: --no-cache
    shard: str | None = None  # "K/N"
    baseline: Path | None = None


@dataclass(frozen=True)
class CheckRun:
    run: RunResult
    written: WrittenReport
    config_path: str


def perform_check(repo: Path, config: Path | None, out: Path, models: Sequence[str], jobs: int,
                  stream: TextIO, environ: dict[str, str] | None = None,
                  options: CheckOptions = CheckOptions()) -> CheckRun:
    """Settings -> engine -> report -> files; raises ConfigError/UsageError for bad input."""
    from onnx_parity.pipeline.all_models import run_models
    from onnx_parity.pipeline.baseline import compare_with_baseline
    from onnx_parity.pipeline.shards import parse_shard
    from onnx_parity.publishing.console import Progress, verdict_table
    from onnx_parity.publishing.files import prepare_output, read_report, write_outputs
    from onnx_parity.report.markdown import render_markdown
    from onnx_parity.settings.loading import load_settings

    if not repo.is_dir():
        raise UsageError(f"--repo {repo}: no such folder. Fix: pass the repository root.")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1.")
    shard = parse_shard(options.shard, "--shard") if options.shard else None
    settings = load_settings(repo.resolve(), config)
    specs = _selected(settings.models, models, settings.relative(settings.config_path))
    # Before any model runs: a baseline that cannot be read would make the run worthless.
    base = read_report(options.baseline, "--baseline") if options.baseline else None
    prepare_output(out)
    environ = dict(environ or os.environ)
    workdir = Path(tempfile.mkdtemp(prefix="onnx-parity-"))
    try:
        cache = _cache(options, environ, stream)
        chosen, plan = _shard_of(specs, shard, cache)
        run = run_models(settings, chosen, workdir, jobs, environ, Progress(stream), cache)
        run = _described(run, settings, specs, shard, plan)
        if base is not None:
            run = compare_with_baseline(run, base, specs)
        markdown = render_markdown(run, footer=footer(run.versions))
        written = write_outputs(run, markdown, out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stream.write("\n" + verdict_table(run))
    stream.write(f"report: {written.report_markdown}\n")
    return CheckRun(run, written, run.config_path)


def _cache(options: CheckOptions, environ: dict[str, str], stream: TextIO) -> ModelCache | None:
    from onnx_parity.pipeline.cache.entries import ModelCache, ResultCodec
    from onnx_parity.report.serialization import model_from_json, model_to_json

    if options.cache is None:
        return None
    def notify(line: str) -> None:
        stream.write(line + "\n")

    return ModelCache(options.cache, ResultCodec(model_to_json, model_from_json),
                      provenance(environ), notify, read=options.read_cache)


def provenance(environ: dict[str, str]) -> Provenance:
    """This run, as a later run that reuses its results will name it."""
    from onnx_parity.results import Provenance

    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Provenance(created, environ.get("GITHUB_SHA") or None,
                      environ.get("GITHUB_RUN_ID") or None)


def _shard_of(specs: tuple[ModelSpec, ...], shard: Shard | None,
              cache: ModelCache | None) -> tuple[tuple[ModelSpec, ...], str | None]:
    from onnx_parity.pipeline.shards import plan_digest, shard_models

    if shard is None:
        return specs, None
    durations = cache.durations() if cache is not None else {}
    return shard_models(specs, shard, durations), plan_digest(specs, durations)


def _described(run: RunResult, settings: Settings, specs: tuple[ModelSpec, ...],
               shard: Shard | None, plan: str | None) -> RunResult:
    from onnx_parity.pipeline.cache.fingerprint import configuration_sha256

    return dataclasses.replace(run, shard=shard,
                               configured_models=tuple(spec.name for spec in specs),
                               configuration_sha256=configuration_sha256(specs, settings.repo),
                               shard_plan=plan)


def perform_merge(reports: Sequence[Path], out: Path, stream: TextIO) -> CheckRun:
    """Shard reports -> one report.json and report.md; raises MergeError (exit 2)."""
    from onnx_parity.publishing.console import verdict_table
    from onnx_parity.publishing.files import prepare_output, read_report, write_report
    from onnx_parity.report.markdown import render_markdown
    from onnx_parity.report.merging import merge_runs

    runs = [(path.as_posix(), read_report(path, "shard report")) for path in reports]
    run = merge_runs(runs)
    prepare_output(out)
    shards = runs[0][1].shard.count if runs[0][1].shard else len(runs)
    markdown = render_markdown(run, footer=f"{footer(run.versions)} · merged from {shards} shards")
    written = write_report(run, markdown, out)
    stream.write(verdict_table(run))
    stream.write(f"report: {written.report_markdown}\n")
    return CheckRun(run, written, run.config_path)


def gate_code(run: RunResult, fail_on: str) -> int:
    from onnx_parity.report.gate import FailOn, gate_passed

    return ExitCode.PASSED if gate_passed(run, FailOn(fail_on)) else ExitCode.FAILED


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

    options = CheckOptions(cache=request.cache_dir, shard=request.shard,
                           baseline=request.baseline)
    done = perform_check(request.repo, request.config, request.out_dir, (),
                         os.cpu_count() or 1, sys.stdout, options=options)
    return CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown)


def merge_for_action(request: MergeRequest) -> CheckOutcome:
    """`onnx-parity merge` as the action's `merge-reports` mode calls it."""
    from onnx_parity.publishing.github.action import CheckOutcome

    done = perform_merge(request.reports, request.out_dir, sys.stdout)
    return CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown)


def _client_factory(api_url: str, token: str) -> GitHubClient:
    from onnx_parity.publishing.github.http import GitHubClient

    return GitHubClient(api_url, token)


def _command(args: argparse.Namespace) -> int:
    if args.command == "check":
        options = CheckOptions(cache=args.cache, read_cache=not args.no_cache, shard=args.shard,
                               baseline=args.baseline)
        done = perform_check(args.repo, args.config, args.out, args.model, args.jobs, sys.stdout,
                             options=options)
        return gate_code(done.run, args.fail_on)
    if args.command == "merge":
        return gate_code(perform_merge(args.reports, args.out, sys.stdout).run, args.fail_on)
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
