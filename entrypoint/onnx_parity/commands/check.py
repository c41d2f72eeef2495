"""`onnx-parity check`: settings -> models (in workers, or from the cache) -> report -> files.

`perform_check` is the command's steps in order, each a function below: the request checked,
the settings loaded and the models selected, the output folder prepared, the models run (this
shard's, through the workers or the cache), the run described and set beside the baseline,
the report rendered and written, the verdict printed. It raises ConfigError/UsageError for
bad input before any model runs; the exit code follows `--fail-on` (`gate_code`).

The stages are used through their front doors (`pipeline.run_models`), which load a name's
module on first use: importing this module loads no stage, so `--help` stays instant, and a
fully cached run never imports torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity import pipeline, publishing, report
from onnx_parity import settings as configuration
from onnx_parity.commands.context import Context
from onnx_parity.commands.usage import UsageError
from onnx_parity.errors import ExitCode
from onnx_parity.locations import source_line
from onnx_parity.results import Provenance

if TYPE_CHECKING:
    from onnx_parity.pipeline import ModelCache
    from onnx_parity.publishing import CheckOutcome, CheckRequest, WrittenReport
    from onnx_parity.results import RunResult, Shard
    from onnx_parity.settings import ModelSpec, Settings


@dataclass(frozen=True)
class CheckTarget:
    """What to check and where the report goes: --repo, --config, --out, --model, --jobs."""

    repo: Path
    config: Path | None  # None: found in `repo`
    out: Path
    models: Sequence[str] = ()  # only these (empty: every configured model)
    jobs: int = 1


@dataclass(frozen=True)
class CheckOptions:
    """What `check` does beyond running the models: cache, shard, baseline, SARIF paths."""

    cache: Path | None = None
    read_cache: bool = True  # False: --no-cache
    shard: str | None = None  # "K/N"
    baseline: Path | None = None
    # `repo` relative to the repository root, for report.sarif (None: found from the
    # enclosing git checkout).
    source_root: str | None = None


@dataclass(frozen=True)
class CheckPlan:
    """A check ready to run: the loaded settings, the selected models, the shard, the baseline."""

    target: CheckTarget
    options: CheckOptions
    settings: Settings
    specs: tuple[ModelSpec, ...]  # selected by --model, before the shard takes its part
    shard: Shard | None
    base: RunResult | None  # the --baseline report


@dataclass(frozen=True)
class CheckRun:
    run: RunResult
    written: WrittenReport
    config_path: str


def check_command(args: argparse.Namespace, context: Context) -> int:
    target = CheckTarget(args.repo, args.config, args.out, args.model, args.jobs)
    options = CheckOptions(cache=args.cache, read_cache=not args.no_cache, shard=args.shard,
                           baseline=args.baseline)
    done = perform_check(target, context.stdout, context.environ, options)
    return gate_code(done.run, args.fail_on)


def perform_check(target: CheckTarget, stream: TextIO, environ: Mapping[str, str] | None = None,
                  options: CheckOptions = CheckOptions()) -> CheckRun:
    """Settings -> engine -> report -> files; raises ConfigError/UsageError for bad input."""
    validate(target)
    plan = planned(target, options)
    publishing.prepare_output(target.out)
    environment = dict(environ or os.environ)
    workdir = Path(tempfile.mkdtemp(prefix="onnx-parity-"))
    try:  # the exported models wait in `workdir` until write_outputs moves them to --out
        run = compared(run_selected(plan, workdir, environment, stream), plan)
        written = write_report(run, plan)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_verdict(stream, run, written, plan.settings.repo)
    return CheckRun(run, written, run.config_path)


def validate(target: CheckTarget) -> None:
    """The command line's own mistakes, before any file is read."""
    if not target.repo.is_dir():
        raise UsageError(f"--repo {target.repo}: no such folder. Fix: pass the repository root.")
    if target.jobs < 1:
        raise UsageError(f"--jobs {target.jobs}: must be at least 1.")


def planned(target: CheckTarget, options: CheckOptions) -> CheckPlan:
    """The shard parsed, the settings loaded, the models selected and the baseline read."""
    shard = pipeline.parse_shard(options.shard, "--shard") if options.shard else None
    settings = configuration.load_settings(target.repo.resolve(), target.config)
    specs = selected(settings.models, target.models, settings.relative(settings.config_path))
    # Before any model runs: a baseline that cannot be read would make the run worthless.
    base = publishing.read_report(options.baseline, "--baseline") if options.baseline else None
    return CheckPlan(target, options, settings, specs, shard, base)


def run_selected(plan: CheckPlan, workdir: Path, environ: dict[str, str],
                 stream: TextIO) -> RunResult:
    """This shard's models through the workers (or the cache), shown on the console."""
    cache = _cache(plan.options, environ, stream)
    chosen, digest = _shard_of(plan.specs, plan.shard, cache)
    settings = plan.settings
    view = publishing.open_console(stream, environ, [spec.name for spec in chosen],
                        settings.relative(settings.config_path))
    with view:
        run = pipeline.run_models(settings, chosen,
                                  pipeline.Workers(workdir, plan.target.jobs, environ),
                                  view.event, view.model_done, cache)
    return described(run, plan, digest)


def _cache(options: CheckOptions, environ: dict[str, str], stream: TextIO) -> ModelCache | None:
    if options.cache is None:
        return None

    def notify(line: str) -> None:
        stream.write(line + "\n")

    codec = pipeline.ResultCodec(report.model_to_json, report.model_from_json)
    return pipeline.ModelCache(options.cache, codec, provenance(environ), notify,
                               read=options.read_cache)


def provenance(environ: dict[str, str]) -> Provenance:
    """This run, as a later run that reuses its results will name it."""
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Provenance(created, environ.get("GITHUB_SHA") or None,
                      environ.get("GITHUB_RUN_ID") or None)


def _shard_of(specs: tuple[ModelSpec, ...], shard: Shard | None,
              cache: ModelCache | None) -> tuple[tuple[ModelSpec, ...], str | None]:
    if shard is None:
        return specs, None
    durations = cache.durations() if cache is not None else {}
    return (pipeline.shard_models(specs, shard, durations),
            pipeline.plan_digest(specs, durations))


def described(run: RunResult, plan: CheckPlan, digest: str | None) -> RunResult:
    """The run as its report names it: the shard, every configured model, the configuration's
    fingerprint and the shard plan (`digest`)."""
    specs = plan.specs
    return dataclasses.replace(run, shard=plan.shard,
                               configured_models=tuple(spec.name for spec in specs),
                               configuration_sha256=pipeline.configuration_sha256(
                                   specs, plan.settings.repo),
                               shard_plan=digest)


def compared(run: RunResult, plan: CheckPlan) -> RunResult:
    """The run beside the --baseline report, when there is one."""
    return run if plan.base is None else pipeline.compare_with_baseline(run, plan.base, plan.specs)


def write_report(run: RunResult, plan: CheckPlan) -> WrittenReport:
    """report.md rendered; every file of the output folder written."""
    markdown = report.render_markdown(run, footer=footer(run.versions))
    repo, within = plan.target.repo, plan.options.source_root
    prefix = configuration.source_root(repo) if within is None else within
    return publishing.write_outputs(run, markdown, plan.target.out, prefix)


def print_verdict(stream: TextIO, run: RunResult, written: WrittenReport, repo: Path) -> None:
    """The verdict table, where each localised mismatch starts (its line read from `repo`), and
    the report's path."""
    stream.write("\n" + report.verdict_table(run))
    stream.write(report.divergence_lines(run, partial(source_line, repo)))
    stream.write(f"report: {written.report_markdown}\n")


def selected(specs: tuple[ModelSpec, ...], names: Sequence[str],
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


def gate_code(run: RunResult, fail_on: str) -> int:
    """`--fail-on` applied to the run: 0 when the gate passes, else 1."""
    passed = report.gate_passed(run, report.FailOn(fail_on))
    return ExitCode.PASSED if passed else ExitCode.FAILED


def check_for_action(request: CheckRequest) -> CheckOutcome:
    """The engine as the GitHub Action calls it (see commands/action.py)."""
    options = CheckOptions(cache=request.cache_dir, shard=request.shard,
                           baseline=request.baseline, source_root=request.source_root)
    target = CheckTarget(request.repo, request.config, request.out_dir, (), os.cpu_count() or 1)
    # sys.stdout as it is now: the action has redirected it into its redacting writer.
    return outcome_of(perform_check(target, sys.stdout, options=options))


def outcome_of(done: CheckRun) -> CheckOutcome:
    """A check or merge as the action publishes it."""
    return publishing.CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown,
                        report_sarif=done.written.report_sarif,
                        report_junit=done.written.report_junit)
