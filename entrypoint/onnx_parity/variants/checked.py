"""The variants stage of one model: each configured variant built from the verified fp32 model,
run on every cut the fp32 model ran (every batch size and every size of each declared
dimension), compared with the PyTorch fp32 outputs verification computed for those cuts.

`check_variants` is the stage's entry. It runs only for a model whose fp32 export passed
(`skipped_variants` records why the others get none); a variant that cannot be built or run
is a `variant-error` and the fp32 verdict stands.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.model_files import ModelFile
from onnx_parity.models import BoundInputs, batch_arrays, input_shapes
from onnx_parity.results import VariantComparison, VariantResult
from onnx_parity.settings import ModelSpec
from onnx_parity.variants.activations import FloatModel
from onnx_parity.variants.build import Feed, VariantFailure, build_variant
from onnx_parity.variants.figures import compare_variant
from onnx_parity.variants.int4 import settings as int4_settings
from onnx_parity.variants.review import degraded, misses, overflow, variant_error
from onnx_parity.verification import (
    CutRun,
    RuntimeFailure,
    Session,
    nonfinite_mismatch,
    open_session,
    ort_feed,
    output_names,
    run_session,
    variant_nonfinite,
)

LATENCY_RUNS = 10  # timed runs per model after one warm-up; the median is reported
FEW_CALIBRATION_SAMPLES = 16


@dataclass(frozen=True)
class Case:
    """One batch PyTorch ran: what onnxruntime is fed, and PyTorch's fp32 outputs."""

    batch_size: int
    feed: Feed  # keyed by the ONNX model's input names
    input_shapes: dict[str, tuple[int, ...]]
    names: tuple[str, ...]
    reference: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class VerifiedModel:
    """The fp32 model that passed verification, the cuts it ran, and the inputs they came from."""

    model: ModelFile  # the exported files in the work folder, read where they are
    runs: Sequence[CutRun]  # every cut both runtimes ran, at every shape, with PyTorch's outputs
    bound: BoundInputs


@dataclass(frozen=True)
class VariantsChecked:
    results: tuple[VariantResult, ...]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class _Context:
    spec: ModelSpec
    cases: tuple[Case, ...]
    fp32: FloatModel
    fp32_size: int
    fp32_latency_ms: float
    folder: Path
    samples: int
    threads: int


def skipped_variants(spec: ModelSpec, fp32_size: int, reason: str) -> VariantsChecked:
    return VariantsChecked(tuple(VariantResult(kind, fp32_size, skipped=reason)
                                 for kind in spec.variants), ())


def check_variants(verified: VerifiedModel, spec: ModelSpec, repo: Path, folder: Path,
                   threads: int = 0) -> VariantsChecked:
    """`threads`: the worker's share of the cores for each onnxruntime session (0: default)."""
    model, bound = verified.model, verified.bound
    folder.mkdir(parents=True, exist_ok=True)
    session = open_session(model.path, spec.runtime_optimization, threads)
    cases = _cases(session, bound, spec, verified.runs)
    calibration = _calibration_feeds(session, bound)
    context = _Context(spec, cases, FloatModel(model, calibration, repo, folder),
                       model.size_bytes, median_latency_ms(session, cases[0].feed), folder,
                       bound.sample_count, threads)
    del session  # its weights leave memory before a variant's are loaded
    results, findings = [], []
    for kind in spec.variants:
        result, found = _variant(kind, context, calibration)
        results.append(result)
        findings += found
    if "fp16" in spec.variants and (overflows := context.fp32.overflows()):
        findings.append(overflow(overflows))
    return VariantsChecked(tuple(results), tuple(findings))


def _variant(kind: str, context: _Context,
             calibration: list[Feed]) -> tuple[VariantResult, list[Finding]]:
    notes = _notes(kind, context.samples)
    settings = _settings(kind, context.spec)
    base = VariantResult(kind, context.fp32_size, notes=notes, settings=settings,
                         fp32_latency_ms=context.fp32_latency_ms)
    # Built under the name it ships under (`<model>.<variant>.onnx`): the .onnx of a model with
    # external data names its data file, which must keep that name in the output folder.
    target = context.folder / f"{context.spec.name}.{kind}.onnx"
    try:
        built = build_variant(kind, context.fp32.model, target, calibration, context.spec)
        session = _session(kind, built, context.spec.runtime_optimization, context.threads)
        comparisons, broken = _compare(kind, session, context.cases)
    except VariantFailure as failure:
        return base, [variant_error(failure)]
    files = built.stored()
    result = VariantResult(
        kind, context.fp32_size, size_bytes=built.size_bytes, sha256=files[0].sha256,
        comparisons=tuple(comparisons), notes=notes, onnx_path=str(built.path),
        settings=settings, latency_ms=median_latency_ms(session, context.cases[0].feed),
        fp32_latency_ms=context.fp32_latency_ms, files=files)
    del session
    missed = misses(result, context.spec)
    if missed:
        broken.append(degraded(kind, missed, context.fp32.losses(kind, built)))
    return result, broken


def _session(kind: str, built: ModelFile, optimization: str, threads: int) -> Session:
    try:
        return open_session(built.path, optimization, threads)
    except RuntimeFailure as error:
        raise VariantFailure(kind, "loaded by onnxruntime", error) from error


def _compare(kind: str, session: Session,
             cases: tuple[Case, ...]) -> tuple[list[VariantComparison], list[Finding]]:
    comparisons: list[VariantComparison] = []
    broken: list[Finding] = []
    for case in cases:
        try:
            outputs = run_session(session, case.feed)
        except RuntimeFailure as error:
            raise VariantFailure(kind, f"run at batch {case.batch_size}", error) from error
        for name, ref, got in zip(case.names, case.reference, outputs, strict=False):
            comparisons.append(compare_variant(name, case.batch_size, case.input_shapes, ref, got))
            if count := nonfinite_mismatch(ref, got):
                broken.append(variant_nonfinite(kind, name, case.batch_size, count))
    return comparisons, _first_per_output(broken)


def _first_per_output(findings: list[Finding]) -> list[Finding]:
    """One nan-or-inf per output of a variant: its first batch says it."""
    seen: dict[object, Finding] = {}
    for finding in findings:
        seen.setdefault(finding.details.get("output"), finding)
    return list(seen.values())


def _cases(session: Session, bound: BoundInputs, spec: ModelSpec,
           runs: Sequence[CutRun]) -> tuple[Case, ...]:
    """Every cut verification ran, with the PyTorch outputs it computed for it, as compared
    (a complex output as its (real, imaginary) pairs, a Python number as a 0-d value)."""
    return tuple(
        Case(run.cut.size, ort_feed(session.input_names, bound, run.cut.feed),
             input_shapes(run.cut.feed),
             output_names(spec, run.reference, session.output_names), run.compared)
        for run in runs if run.reference is not None)


def _calibration_feeds(session: Session, bound: BoundInputs) -> list[Feed]:
    """Every committed sample, one at a time (or in the model's static batch when it has one)."""
    size = 1
    first = session.handle.get_inputs()[0]
    axis = bound.contract.batch_axis(bound.names[0]) if bound.names else 0
    if axis is not None and axis < len(first.shape):
        static = first.shape[axis]
        size = static if isinstance(static, int) and static > 0 else 1
    return [ort_feed(session.input_names, bound,
                     batch_arrays(bound, start, size))
            for start in range(0, bound.sample_count, size)]


def _settings(kind: str, spec: ModelSpec) -> dict[str, object]:
    made: dict[str, object] = ({"calibration": spec.calibration} if kind == "int8-static"
                               else int4_settings(spec.int4) if kind == "int4" else {})
    return {**made, "min_sqnr_db": spec.min_sqnr_db,
            "min_top1_agreement": spec.min_top1_agreement}


def _notes(kind: str, calibration_samples: int) -> tuple[str, ...]:
    if kind != "int8-static" or calibration_samples >= FEW_CALIBRATION_SAMPLES:
        return ()
    return (f"calibrated on {calibration_samples} committed sample(s), fewer than "
            f"{FEW_CALIBRATION_SAMPLES}: the activation ranges may not cover deployed inputs; "
            "commit more real, preprocessed samples",)


def median_latency_ms(session: Session, feed: Feed) -> float:
    """onnxruntime's median wall time for one run (report only: machines are noisy)."""
    session.handle.run(None, feed)  # warm-up: allocations and kernel selection
    times = []
    for _ in range(LATENCY_RUNS):
        began = time.perf_counter()
        session.handle.run(None, feed)
        times.append(time.perf_counter() - began)
    return 1000.0 * statistics.median(times)
