"""Run every configured model, each in its own worker, and gather one RunResult.

This side never imports torch: the workers do. Whatever happens to a worker, every model
ends up in the result, with the evidence that was gathered. With a cache, a model whose
fingerprint matches an entry reuses it and starts no worker; when none has to run, no pool
(and so no torch) is started at all.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onnx_parity import __version__
from onnx_parity.ansi import strip_ansi
from onnx_parity.credentials import without_credentials
from onnx_parity.findings import Finding
from onnx_parity.isolation import Job, JobOutcome, WorkerFailure
from onnx_parity.locations import scrub_paths, source_line
from onnx_parity.models import installed_version
from onnx_parity.pipeline.cache.entries import ModelCache
from onnx_parity.pipeline.cache.fingerprint import environment, fingerprint_key
from onnx_parity.pipeline.job import ModelJob
from onnx_parity.pipeline.preimports import installed_imports
from onnx_parity.pipeline.threads import thread_budget
from onnx_parity.pipeline.torch_pool import TorchWorkerPool
from onnx_parity.pipeline.worker_failures import worker_finding
from onnx_parity.results import ModelResult, RunResult
from onnx_parity.settings import ModelSpec, Settings, resolved_env

JOB_FUNCTION = "onnx_parity.pipeline.one_model:run_model"
LIBRARIES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy")

EventSink = Callable[[str, str, float], None]
ModelSink = Callable[[ModelResult], None]


@dataclass(frozen=True)
class Workers:
    """Where the workers run, how many at once, and the environment they start from."""

    workdir: Path
    jobs: int
    environ: Mapping[str, str]


def versions() -> dict[str, str]:
    found = {"onnx-parity": __version__, "python": sys.version.split()[0]}
    for name in LIBRARIES:
        found[name] = installed_version(name) or "not installed"
    return found


def worker_environment(environ: Mapping[str, str],
                       configured: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the zygote starts with, and every worker inherits: the run's environment without
    credentials, then the configuration's `env` (resolved), then what the tool sets itself
    (settings/keys/environment.py refuses `env` names among those)."""
    env = {**without_credentials(environ), **(configured or {})}
    env["PYTHONIOENCODING"] = "utf-8"  # an ascii console must not break exporter output
    return env


def run_models(settings: Settings, specs: tuple[ModelSpec, ...], workers: Workers,
               on_event: EventSink, on_model: ModelSink | None = None,
               cache: ModelCache | None = None) -> RunResult:
    """Every model in `specs`, in that order; `on_model` gets each result as it is ready.

    With a cache, a model whose fingerprint matches an entry reuses it and starts no worker.
    """
    keys = _fingerprints(specs, settings) if cache else {}
    reused = _cached(specs, keys, cache, settings.repo, workers.workdir, on_event)
    for result in reused.values():
        if on_model is not None:
            on_model(result)
    missing = tuple(spec for spec in specs if spec.name not in reused)
    by_name = {spec.name: spec for spec in missing}
    fresh: dict[str, ModelResult] = {}

    def collect(outcome: JobOutcome) -> None:
        spec = by_name[outcome.key]
        fresh[spec.name] = finish(spec, outcome, settings.repo, workers.workdir)
        if cache is not None and outcome.failure is None:
            cache.store(keys[spec.name], fresh[spec.name], outcome.seconds)
        if on_model is not None:
            on_model(fresh[spec.name])

    _run_workers(settings, missing, workers, on_event, collect)
    models = tuple(reused.get(spec.name) or fresh[spec.name] for spec in specs)
    return RunResult(settings.relative(settings.config_path), versions(), models,
                     env=tuple(sorted(settings.env)))


def _fingerprints(specs: Sequence[ModelSpec], settings: Settings) -> dict[str, str]:
    env = environment(settings.env)
    return {spec.name: fingerprint_key(spec, settings.repo, env) for spec in specs}


def _cached(specs: Sequence[ModelSpec], keys: dict[str, str], cache: ModelCache | None,
            repo: Path, workdir: Path, on_event: EventSink) -> dict[str, ModelResult]:
    found: dict[str, ModelResult] = {}
    for spec in specs:
        hit = cache.lookup(spec.name, keys[spec.name], repo, workdir) if cache else None
        if hit is not None:
            found[spec.name] = hit
            on_event(spec.name, "cached", 0.0)
    return found


def _run_workers(settings: Settings, specs: tuple[ModelSpec, ...], workers: Workers,
                 on_event: EventSink,
                 on_outcome: Callable[[JobOutcome], None]) -> list[JobOutcome]:
    if not specs:
        return []
    slots = max(1, min(workers.jobs, len(specs)))
    threads = thread_budget(slots)
    pool_jobs = [Job(spec.name, ModelJob(spec, settings.repo, threads), spec.timeout_seconds,
                     spec.memory_limit_mb) for spec in specs]
    with TorchWorkerPool(JOB_FUNCTION, workers.workdir, slots,
                         worker_environment(workers.environ,
                                            resolved_env(settings.env, settings.repo)),
                         preimports=installed_imports(specs, settings.repo)) as pool:
        return pool.run(pool_jobs, on_event, on_outcome)


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
