"""The verification stage of one model: declared axes, every batch size, golden outputs.

`verify_model` is the stage's entry: it runs PyTorch (the reference) and onnxruntime on the
same batches and turns what they give into comparisons and findings, using the rules of the
modules beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.export.inspection import ModelFacts
from onnx_parity.findings import Finding
from onnx_parity.models.batches import batch_plan
from onnx_parity.models.binding import BoundInputs
from onnx_parity.models.model_zoo import GoldenCase
from onnx_parity.models.reference import (
    Reference,
    ReferenceFailure,
    as_tensors,
    batch_arrays,
    run_reference,
)
from onnx_parity.results import OutputComparison
from onnx_parity.settings.schema import ModelSpec
from onnx_parity.verification.compare import compare_output, nonfinite_mismatch
from onnx_parity.verification.frozen import FrozenEvidence, declared_axes
from onnx_parity.verification.golden import golden_findings
from onnx_parity.verification.outputs import (
    comparison_findings,
    count_mismatch,
    merge_cuts,
    output_names,
)
from onnx_parity.verification.run_failures import native_line, reference_finding, runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure, Session, open_session, run_session

# Each batch size runs over consecutive cuts covering every sample, up to this many cuts.
MAX_CUTS_PER_BATCH_SIZE = 8


@dataclass(frozen=True)
class Exported:
    """What verification needs of the export stage's outcome."""

    model_bytes: bytes
    facts: ModelFacts
    export_batch: int
    frozen: str | None  # PyTorch's evidence of a hard-coded batch, found before export


@dataclass
class Verified:
    repo: Path
    findings: list[Finding] = field(default_factory=list)
    comparisons: list[OutputComparison] = field(default_factory=list)
    # Outputs where NaN/Inf sits where PyTorch has another value (the nan-or-inf finding).
    nonfinite: set[str] = field(default_factory=set)


def verify_model(module: Any, exported: Exported, bound: BoundInputs,
                 golden: tuple[GoldenCase, ...], spec: ModelSpec, repo: Path,
                 threads: int = 0) -> Verified:
    """`threads`: onnxruntime's intra- and inter-op threads (0: its default, one per core)."""
    verified = Verified(repo=repo)
    frozen = FrozenEvidence()
    verified.findings += declared_axes(exported.facts, spec, bound, frozen)
    if exported.frozen:
        frozen.add_run(exported.frozen)
    try:
        session = open_session(exported.model_bytes, threads)
    except RuntimeFailure as error:
        verified.findings.append(runtime_finding("onnxruntime cannot load the model", error))
        verified.findings += frozen.findings()
        return verified
    for size in spec.batch_sizes:
        _run_batch_size(module, session, bound, spec, size, exported.export_batch, frozen,
                        verified)
    verified.findings += frozen.findings()
    verified.findings += comparison_findings(verified.comparisons, verified.nonfinite, spec)
    verified.findings += golden_findings(session, golden, spec)
    return verified


def _run_batch_size(module: Any, session: Session, bound: BoundInputs, spec: ModelSpec,
                    size: int, export_batch: int, frozen: FrozenEvidence,
                    verified: Verified) -> None:
    """Every cut of this size; the comparisons merge into one row per output."""
    cuts = list(batch_plan(bound.sample_count, (size,)))[:MAX_CUTS_PER_BATCH_SIZE]
    rows: list[OutputComparison] = []
    for cut in cuts:
        found = _run_batch(module, session, bound, spec, cut.start, size, export_batch, frozen,
                           verified)
        if found is None:
            return
        rows += found
    verified.comparisons += merge_cuts(rows)


def _run_batch(module: Any, session: Session, bound: BoundInputs, spec: ModelSpec, start: int,
               size: int, export_batch: int, frozen: FrozenEvidence,
               verified: Verified) -> list[OutputComparison] | None:
    """One batch through both runtimes; None when either could not run it (evidence kept)."""
    feed = batch_arrays(bound.arrays, bound.names, start, size)
    other_size = size != export_batch
    try:
        reference = run_reference(module, as_tensors(feed, bound.names))
    except ReferenceFailure as error:
        if other_size:
            frozen.add_run(f"PyTorch itself fails at batch {size}: {error}")
        else:
            verified.findings.append(reference_finding(error, size, verified.repo))
        return None
    try:
        actual = run_session(session, _ort_feed(session, bound, feed))
    except RuntimeFailure as error:
        if other_size:
            frozen.add_run(f"onnxruntime fails at batch {size} (exported from batch "
                           f"{export_batch}): {error.message}{native_line(error)}")
        else:
            verified.findings.append(runtime_finding(f"onnxruntime fails at batch {size}", error))
        return None
    return _compare_all(reference, actual, session, spec, size, verified)


def _ort_feed(session: Session, bound: BoundInputs,
              feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if set(session.input_names) == set(bound.names):
        return {name: feed[name] for name in session.input_names}
    return {ort: feed[ours]
            for ort, ours in zip(session.input_names, bound.names, strict=False)}


def _compare_all(reference: Reference, actual: list[np.ndarray], session: Session,
                 spec: ModelSpec, size: int, verified: Verified) -> list[OutputComparison]:
    if len(reference.arrays) != len(actual):
        verified.findings.append(count_mismatch(size, len(reference.arrays), session.output_names))
    names = output_names(spec, reference, session.output_names)
    for name, ref, out in zip(names, reference.arrays, actual, strict=False):
        if nonfinite_mismatch(ref, out):
            verified.nonfinite.add(name)
    return [
        compare_output(name, size, ref, out, spec.atol, spec.rtol)
        for name, ref, out in zip(names, reference.arrays, actual, strict=False)
    ]
