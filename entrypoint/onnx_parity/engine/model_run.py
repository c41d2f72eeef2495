"""One model, start to finish: samples, build, export, check, run every batch size, compare.

`run_model` is the job each worker process runs. It never raises for anything the user's
model, samples or exporter do: every failure becomes a finding, and whatever was measured
before the failure stays in the result.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_parity.engine.binding import bind_inputs
from onnx_parity.engine.exporting import ExportOutcome, export_model
from onnx_parity.engine.verifying import verify_model
from onnx_parity.engine.results import ExportAttempt, ModelResult, OutputComparison, StepTiming
from onnx_parity.findings import Finding, Severity
from onnx_parity.models.factory import LoadError, build_model
from onnx_parity.models.samples import SampleError, SampleSet, load_samples
from onnx_parity.settings.schema import ModelSpec

Progress = Callable[[str], None]


class StopModel(Exception):
    """Nothing more can be measured for this model; the findings so far are its verdict."""


@dataclass
class Ledger:
    """What one model's run has found so far."""

    spec: ModelSpec
    findings: list[Finding] = field(default_factory=list)
    comparisons: list[OutputComparison] = field(default_factory=list)
    attempts: list[ExportAttempt] = field(default_factory=list)
    steps: list[StepTiming] = field(default_factory=list)
    exporter: str | None = None
    opset: int | None = None
    onnx_path: str | None = None
    onnx_sha256: str | None = None
    sample_sha256: dict[str, str] = field(default_factory=dict)

    def result(self) -> ModelResult:
        return ModelResult(
            name=self.spec.name, exporter=self.exporter, requested_opset=self.spec.opset,
            opset=self.opset, atol=self.spec.atol, rtol=self.spec.rtol,
            batch_sizes=self.spec.batch_sizes, findings=tuple(self.findings),
            comparisons=tuple(self.comparisons), attempts=tuple(self.attempts),
            steps=tuple(self.steps), onnx_path=self.onnx_path, onnx_sha256=self.onnx_sha256,
            sample_sha256=dict(self.sample_sha256),
        )


class Timer:
    def __init__(self, ledger: Ledger, progress: Progress):
        self.ledger = ledger
        self.progress = progress

    def step(self, name: str) -> "_Step":
        self.progress(name)
        return _Step(self.ledger, name)


class _Step:
    def __init__(self, ledger: Ledger, name: str):
        self.ledger, self.name, self.started = ledger, name, time.perf_counter()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.ledger.steps.append(StepTiming(self.name, time.perf_counter() - self.started))


def run_model(payload: tuple[ModelSpec, Path], workdir: Path, progress: Progress) -> ModelResult:
    spec, repo = payload
    _tolerant_console()
    ledger = Ledger(spec)
    try:
        _pipeline(spec, repo, workdir, ledger, Timer(ledger, progress))
    except (LoadError, SampleError) as error:
        ledger.findings.append(_load_finding(error))
    except StopModel:
        pass
    return ledger.result()


def _pipeline(spec: ModelSpec, repo: Path, workdir: Path, ledger: Ledger, timer: Timer) -> None:
    with timer.step("load samples"):
        samples = load_samples(spec.inputs, repo)
        ledger.sample_sha256.update(samples.files)
        ledger.findings.extend(_sample_notes(samples))
    with timer.step("build model"):
        loaded = build_model(spec, repo)
        ledger.findings.extend(loaded.findings)
        bound = bind_inputs(loaded.module, spec, samples.named, samples.positional)
    with timer.step("export"):
        outcome = export_model(loaded.module, bound, spec, repo)
        _record_export(outcome, ledger)
    if outcome.model_bytes is None:
        if outcome.frozen:
            ledger.findings.append(Finding("frozen-dimension", f"batch axis: {outcome.frozen}"))
        raise StopModel()
    _save_model(outcome.model_bytes, workdir, ledger)
    with timer.step("verify"):
        verified = verify_model(loaded.module, outcome, bound, samples.golden, spec, repo)
        ledger.opset = verified.opset
        ledger.findings.extend(verified.findings)
        ledger.comparisons.extend(verified.comparisons)


def _record_export(outcome: ExportOutcome, ledger: Ledger) -> None:
    ledger.attempts.extend(outcome.attempts)
    ledger.findings.extend(outcome.findings)
    ledger.exporter = outcome.exporter


def _save_model(model_bytes: bytes, workdir: Path, ledger: Ledger) -> None:
    path = workdir / f"{ledger.spec.name}.onnx"
    path.write_bytes(model_bytes)
    ledger.onnx_path = str(path)
    ledger.onnx_sha256 = hashlib.sha256(model_bytes).hexdigest()


def _sample_notes(samples: SampleSet) -> list[Finding]:
    return [
        Finding("nan-or-inf", f"samples: {note}; compared by the NaN rule (NaN only where "
                "PyTorch has NaN, each infinity only where PyTorch has the same).",
                severity=Severity.NOTE)
        for note in samples.notes
    ]


def _load_finding(error: Exception) -> Finding:
    return Finding("load-error", str(error), file=getattr(error, "file", None),
                   line=getattr(error, "line", None))


def _tolerant_console() -> None:
    """An ascii console must not turn an exporter's emoji into a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure: Any = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def run_in_process(spec: ModelSpec, repo: Path, workdir: Path,
                   progress: Progress = lambda step: None) -> ModelResult:
    """For tests: the same job without a worker process (build_model seeds as usual)."""
    return run_model((spec, repo), workdir, progress)
