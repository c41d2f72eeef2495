"""Run every configured model, each in its own worker, and gather one RunResult.

This side never imports torch: the workers do. Whatever happens to a worker, every model
ends up in the result, with the evidence that was gathered.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from onnx_parity import __version__
from onnx_parity.ansi import strip_ansi
from onnx_parity.credentials import without_credentials
from onnx_parity.findings import Finding
from onnx_parity.isolation.pool import Job, JobOutcome, WorkerFailure
from onnx_parity.locations import scrub_paths, source_line
from onnx_parity.pipeline.torch_pool import TorchWorkerPool
from onnx_parity.pipeline.worker_failures import worker_finding
from onnx_parity.results import ModelResult, RunResult
from onnx_parity.settings.schema import ModelSpec, Settings

JOB_FUNCTION = "onnx_parity.pipeline.one_model:run_model"
LIBRARIES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy")

EventSink = Callable[[str, str, float], None]
ModelSink = Callable[[ModelResult], None]


def versions() -> dict[str, str]:
    found = {"onnx-parity": __version__, "python": sys.version.split()[0]}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    env = without_credentials(environ)
    env["PYTHONIOENCODING"] = "utf-8"  # an ascii console must not break exporter output
    return env


def run_models(settings: Settings, specs: tuple[ModelSpec, ...], workdir: Path, jobs: int,
               environ: Mapping[str, str], on_event: EventSink,
               on_model: ModelSink | None = None) -> RunResult:
    """Every model in `specs`, in that order; `on_model` gets each result as it is ready."""
    pool_jobs = [
        Job(spec.name, (spec, settings.repo), spec.timeout_seconds, spec.memory_limit_mb)
        for spec in specs
    ]
    by_name = {spec.name: spec for spec in specs}
    finished: dict[str, ModelResult] = {}

    def collect(outcome: JobOutcome) -> None:
        finished[outcome.key] = finish(by_name[outcome.key], outcome, settings.repo, workdir)
        if on_model is not None:
            on_model(finished[outcome.key])

    with TorchWorkerPool(JOB_FUNCTION, workdir, max(1, min(jobs, len(specs))),
                         worker_environment(environ)) as pool:
        pool.run(pool_jobs, on_event, collect)
    models = tuple(finished[spec.name] for spec in specs)
    return RunResult(settings.relative(settings.config_path), versions(), models)


def finish(spec: ModelSpec, outcome: JobOutcome, repo: Path, workdir: Path) -> ModelResult:
    result = outcome.result if isinstance(outcome.result, ModelResult) else None
    if result is None:
        result = _failed_result(spec, outcome, repo)
    log = _read_log(outcome.log_path)
    roots = (repo, workdir)
    findings = tuple(_with_source(_scrubbed(f, roots), repo) for f in result.findings)
    return dataclasses.replace(result, findings=findings, log=scrub_paths(log, roots),
                               seconds=outcome.seconds)


def _failed_result(spec: ModelSpec, outcome: JobOutcome, repo: Path) -> ModelResult:
    failure = outcome.failure or WorkerFailure(spec.name, "crash", "the worker returned no result",
                                               "", outcome.seconds)
    return ModelResult(name=spec.name, exporter=None, requested_opset=spec.opset, opset=None,
                       atol=spec.atol, rtol=spec.rtol, batch_sizes=spec.batch_sizes,
                       findings=(worker_finding(failure, repo),))


def _read_log(path: Path) -> str:
    try:
        return strip_ansi(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def _scrubbed(finding: Finding, roots: tuple[Path, ...]) -> Finding:
    return dataclasses.replace(
        finding,
        message=scrub_paths(finding.message, roots),
        evidence=scrub_paths(finding.evidence, roots) if finding.evidence else None,
    )


def _with_source(finding: Finding, repo: Path) -> Finding:
    """Carry the offending source line, so the comment shows it without the repository."""
    if not finding.file or not finding.line:
        return finding
    text = source_line(repo, finding.file, finding.line)
    if text is None:
        return finding
    return dataclasses.replace(finding, details={**finding.details, "source": text})
