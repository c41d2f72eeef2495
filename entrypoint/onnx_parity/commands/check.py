"""`onnx-parity check`: settings -> models (in workers, or from the cache) -> report -> files.

Raises ConfigError/UsageError for bad input before any model runs; the exit code follows
`--fail-on` (commands/merge.py's gate_code).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from onnx_parity.commands.usage import UsageError

if TYPE_CHECKING:  # the real imports stay inside the functions: --help must not load them
    from onnx_parity.pipeline.cache.entries import ModelCache
    from onnx_parity.publishing.files import WrittenReport
    from onnx_parity.publishing.github.action import CheckOutcome, CheckRequest
    from onnx_parity.results import Provenance, RunResult, Shard
    from onnx_parity.settings.schema import ModelSpec, Settings


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
class CheckRun:
    run: RunResult
    written: WrittenReport
    config_path: str


def perform_check(repo: Path, config: Path | None, out: Path, models: Sequence[str], jobs: int,
                  stream: TextIO, environ: dict[str, str] | None = None,
                  options: CheckOptions = CheckOptions()) -> CheckRun:
    """Settings -> engine -> report -> files; raises ConfigError/UsageError for bad input."""
    from onnx_parity.locations import source_line
    from onnx_parity.pipeline.all_models import run_models
    from onnx_parity.pipeline.baseline import compare_with_baseline
    from onnx_parity.pipeline.shards import parse_shard
    from onnx_parity.publishing.console import open_console
    from onnx_parity.publishing.files import prepare_output, read_report, write_outputs
    from onnx_parity.report.console_text import divergence_lines, verdict_table
    from onnx_parity.report.markdown import render_markdown
    from onnx_parity.settings.loading import load_settings
    from onnx_parity.settings.source_root import source_root as enclosing_checkout

    if not repo.is_dir():
        raise UsageError(f"--repo {repo}: no such folder. Fix: pass the repository root.")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be at least 1.")
    shard = parse_shard(options.shard, "--shard") if options.shard else None
    settings = load_settings(repo.resolve(), config)
    specs = selected(settings.models, models, settings.relative(settings.config_path))
    # Before any model runs: a baseline that cannot be read would make the run worthless.
    base = read_report(options.baseline, "--baseline") if options.baseline else None
    prepare_output(out)
    environment = dict(environ or os.environ)
    workdir = Path(tempfile.mkdtemp(prefix="onnx-parity-"))
    try:
        cache = _cache(options, environment, stream)
        chosen, plan = _shard_of(specs, shard, cache)
        view = open_console(stream, environment, [spec.name for spec in chosen],
                            settings.relative(settings.config_path))
        with view:
            run = run_models(settings, chosen, workdir, jobs, environment, view.event,
                             view.model_done, cache)
        run = _described(run, settings, specs, shard, plan)
        if base is not None:
            run = compare_with_baseline(run, base, specs)
        markdown = render_markdown(run, footer=footer(run.versions))
        prefix = enclosing_checkout(repo) if options.source_root is None else options.source_root
        written = write_outputs(run, markdown, out, prefix)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stream.write("\n" + verdict_table(run))
    stream.write(divergence_lines(run, lambda file, line: source_line(settings.repo, file, line)))
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


def check_for_action(request: CheckRequest) -> CheckOutcome:
    """The engine as the GitHub Action calls it (see publishing/github/action.py)."""
    from onnx_parity.publishing.github.action import CheckOutcome

    options = CheckOptions(cache=request.cache_dir, shard=request.shard,
                           baseline=request.baseline, source_root=request.source_root)
    done = perform_check(request.repo, request.config, request.out_dir, (),
                         os.cpu_count() or 1, sys.stdout, options=options)
    return CheckOutcome(run=done.run, config_path=done.config_path,
                        report_json=done.written.report_json,
                        report_markdown=done.written.report_markdown,
                        report_sarif=done.written.report_sarif,
                        report_junit=done.written.report_junit)
