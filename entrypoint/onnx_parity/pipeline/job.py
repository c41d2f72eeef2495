"""What one model's run in its worker hands along: the job, the ledger of what was found, the timer.

Shared by one_model.py and the generating paths (generating/), which fill the same ledger: a
module of its own so that they import it, and not one another, and the pipeline's imports run
one way (one_model -> generating -> job).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from onnx_parity.findings import Finding
from onnx_parity.generation_results import GenerationResult
from onnx_parity.results import (
    DimensionLengths,
    Divergence,
    ExportAttempt,
    ModelResult,
    OutputComparison,
    Repro,
    StepTiming,
    StoredFile,
    VariantResult,
)
from onnx_parity.settings import ModelSpec

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelJob:
    """What a worker is handed: the model, the repository, and its share of the cores."""

    spec: ModelSpec
    repo: Path
    threads: int = 0  # torch and onnxruntime threads; 0 keeps their defaults


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
    onnx_files: tuple[StoredFile, ...] = ()
    sample_sha256: dict[str, str] = field(default_factory=dict)
    variants: list[VariantResult] = field(default_factory=list)
    axis_sizes: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    dimension_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    linked_axes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lengths: dict[str, DimensionLengths] = field(default_factory=dict)
    divergence: Divergence | None = None
    repro: Repro | None = None
    generation: GenerationResult | None = None

    def result(self) -> ModelResult:
        return ModelResult(
            name=self.spec.name, exporter=self.exporter, requested_opset=self.spec.opset,
            opset=self.opset, atol=self.spec.atol, rtol=self.spec.rtol,
            batch_sizes=self.spec.batch_sizes, findings=tuple(self.findings),
            comparisons=tuple(self.comparisons), attempts=tuple(self.attempts),
            steps=tuple(self.steps), onnx_path=self.onnx_path, onnx_sha256=self.onnx_sha256,
            onnx_files=self.onnx_files, sample_sha256=dict(self.sample_sha256),
            variants=tuple(self.variants),
            runtime_optimization=self.spec.runtime_optimization,
            forward_kwargs=dict(self.spec.forward_kwargs),
            axis_sizes=dict(self.axis_sizes), dimension_sizes=dict(self.dimension_sizes),
            linked_axes=dict(self.linked_axes),
            lengths=dict(self.lengths),
            divergence=self.divergence, repro=self.repro, generation=self.generation,
        )


class Timer:
    """Announces each step (progress) and records how long it took (StepTiming)."""

    def __init__(self, ledger: Ledger, progress: Progress, started: float):
        self.ledger = ledger
        self.progress = progress
        self.started = started  # time.monotonic() when the model's run began

    def step(self, name: str) -> _Step:
        self.progress(name)
        return _Step(self.ledger, name)


class _Step:
    def __init__(self, ledger: Ledger, name: str):
        self.ledger, self.name, self.started = ledger, name, time.perf_counter()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.ledger.steps.append(StepTiming(self.name, time.perf_counter() - self.started))
