"""The verification step of one model: structure, declared axes, every batch size, goldens."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.engine.binding import BoundInputs
from onnx_parity.engine.exporting import ExportOutcome, reference_finding
from onnx_parity.engine.results import OutputComparison
from onnx_parity.engine.torch_side import (Reference, ReferenceFailure, as_tensors, batch_arrays,
                                           run_reference)
from onnx_parity.export.inspection import ModelFacts, inspect_model, is_symbolic
from onnx_parity.findings import Finding
from onnx_parity.models.samples import GoldenCase
from onnx_parity.settings.schema import ModelSpec
from onnx_parity.verification.batches import batch_plan
from onnx_parity.verification.compare import compare_output, nonfinite_mismatch
from onnx_parity.verification.runtime import RuntimeFailure, Session, open_session, run_session


# Each batch size runs over consecutive cuts covering every sample, up to this many cuts.
MAX_CUTS_PER_BATCH_SIZE = 8


@dataclass
class Verified:
    opset: int | None
    repo: Path
    findings: list[Finding] = field(default_factory=list)
    comparisons: list[OutputComparison] = field(default_factory=list)
    # Outputs where NaN/Inf sits where PyTorch has another value (the nan-or-inf finding).
    nonfinite: set[str] = field(default_factory=set)


@dataclass
class FrozenEvidence:
    """Everything that says one axis is frozen, gathered into one finding per axis."""

    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, subject: str, line: str) -> None:
        self.lines.setdefault(subject, []).append(line)

    def add_run(self, line: str) -> None:
        """A failure at another batch size belongs to the frozen batch axis, if one is known."""
        subject = next((s for s in self.lines if s.endswith("axis 0") or " axis 0 (" in s),
                       "batch axis")
        self.add(subject, line)

    def findings(self) -> list[Finding]:
        return [
            Finding("frozen-dimension", f"{subject}: {'; '.join(lines)}",
                    evidence="\n".join(lines), details={"subject": subject})
            for subject, lines in self.lines.items()
        ]


def verify_model(module: Any, outcome: ExportOutcome, bound: BoundInputs,
                 golden: tuple[GoldenCase, ...], spec: ModelSpec, repo: Path) -> Verified:
    assert outcome.model_bytes is not None
    facts = inspect_model(outcome.model_bytes)
    verified = Verified(opset=facts.opset, repo=repo)
    frozen = FrozenEvidence()
    verified.findings += structure_findings(facts, spec)
    _declared_axes(facts, spec, bound, frozen, verified.findings)
    if outcome.frozen:
        frozen.add_run(outcome.frozen)
    try:
        session = open_session(outcome.model_bytes)
    except RuntimeFailure as error:
        verified.findings.append(_runtime_finding("onnxruntime cannot load the model", error))
        verified.findings += frozen.findings()
        return verified
    for size in spec.batch_sizes:
        _run_batch_size(module, session, bound, spec, size, outcome.export_batch, frozen, verified)
    verified.findings += frozen.findings()
    verified.findings += comparison_findings(verified.comparisons, verified.nonfinite, spec)
    verified.findings += _golden_findings(session, bound, golden, spec)
    return verified


def structure_findings(facts: ModelFacts, spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    if facts.checker_error:
        findings.append(Finding("onnx-checker", f"onnx.checker: {facts.checker_error}",
                                evidence=facts.checker_error))
    if facts.opset != spec.opset:
        findings.append(Finding(
            "opset-mismatch",
            f"asked for opset {spec.opset}, the exported model declares opset {facts.opset}",
            details={"requested": spec.opset, "actual": facts.opset},
        ))
    return findings


def _declared_axes(facts: ModelFacts, spec: ModelSpec, bound: BoundInputs,
                   frozen: FrozenEvidence, findings: list[Finding]) -> None:
    for name, axes in spec.dynamic_axes.items():
        dims = facts.inputs.get(name, facts.outputs.get(name))
        if dims is None:
            findings.append(_unknown_axis_name(name, facts))
            continue
        for axis, label in sorted(axes.items()):
            if axis < len(dims) and not is_symbolic(dims[axis]):
                frozen.add(f'"{name}" axis {axis} ("{label}")',
                           f"declared dynamic, but the exported model fixes it at {dims[axis]} "
                           f"(shape {_shape(dims)})")
    if len(spec.batch_sizes) > 1:
        for name in bound.names:
            dims = facts.inputs.get(name)
            declared = 0 in spec.dynamic_axes.get(name, {})
            if dims and not declared and not is_symbolic(dims[0]):
                frozen.add(f'"{name}" axis 0',
                           f"static at {dims[0]} (shape {_shape(dims)}) while batch-sizes "
                           f"{list(spec.batch_sizes)} asks for several batch sizes; declare it "
                           f'in `dynamic-axes` ({name} = {{ 0 = "batch" }})')


def _unknown_axis_name(name: str, facts: ModelFacts) -> Finding:
    return Finding(
        "shape-mismatch",
        f'`dynamic-axes` names "{name}", but the exported model has inputs '
        f"{sorted(facts.inputs)} and outputs {sorted(facts.outputs)}. Fix: name the outputs "
        "with `outputs = [...]` or correct the name in `dynamic-axes`.",
    )


def _shape(dims: tuple[int | str | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _run_batch_size(module: Any, session: Session, bound: BoundInputs, spec: ModelSpec,
                    size: int, export_batch: int, frozen: FrozenEvidence,
                    verified: Verified) -> None:
    """Every cut of this size; the comparisons merge into one row per output."""
    cuts = [c for c in batch_plan(bound.sample_count, (size,))][:MAX_CUTS_PER_BATCH_SIZE]
    rows: list[OutputComparison] = []
    for cut in cuts:
        found = _run_batch(module, session, bound, spec, cut.start, size, export_batch, frozen,
                           verified)
        if found is None:
            return
        rows += found
    verified.comparisons += merge_cuts(rows)


def merge_cuts(rows: list[OutputComparison]) -> list[OutputComparison]:
    merged: list[OutputComparison] = []
    for output in dict.fromkeys(row.output for row in rows):
        same = [row for row in rows if row.output == output]
        worst = next((row for row in same if not row.passed), same[0])
        atols = [row.smallest_passing_atol for row in same]
        merged.append(dataclasses.replace(
            worst,
            max_abs_diff=_max_known(row.max_abs_diff for row in same),
            max_rel_diff=_max_known(row.max_rel_diff for row in same),
            mismatched=sum(row.mismatched for row in same),
            total=sum(row.total for row in same),
            smallest_passing_atol=None if None in atols else max(atols),  # type: ignore[type-var]
            passed=all(row.passed for row in same),
        ))
    return merged


def _max_known(values: Any) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


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
                           f"{export_batch}): {error.message}{_native(error)}")
        else:
            verified.findings.append(_runtime_finding(f"onnxruntime fails at batch {size}", error))
        return None
    return _compare_all(reference, actual, session, spec, size, verified)


def _ort_feed(session: Session, bound: BoundInputs,
              feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if set(session.input_names) == set(bound.names):
        return {name: feed[name] for name in session.input_names}
    return {ort: feed[ours] for ort, ours in zip(session.input_names, bound.names)}


def _compare_all(reference: Reference, actual: list[np.ndarray], session: Session,
                 spec: ModelSpec, size: int, verified: Verified) -> list[OutputComparison]:
    if len(reference.arrays) != len(actual):
        verified.findings.append(Finding(
            "shape-mismatch",
            f"at batch {size} PyTorch returned {len(reference.arrays)} tensor(s) but the ONNX "
            f"model has {len(actual)} output(s) {list(session.output_names)}. Fix: return a flat "
            "tuple of tensors (None and non-tensor values are dropped by the exporters).",
        ))
    names = output_names(spec, reference, session)
    for name, ref, out in zip(names, reference.arrays, actual):
        if nonfinite_mismatch(ref, out):
            verified.nonfinite.add(name)
    return [
        compare_output(name, size, ref, out, spec.atol, spec.rtol)
        for name, ref, out in zip(names, reference.arrays, actual)
    ]


def output_names(spec: ModelSpec, reference: Reference, session: Session) -> tuple[str, ...]:
    """The configured names, else the places in forward's returned structure, else ONNX's."""
    if spec.outputs:
        return spec.outputs
    if reference.names == (None,):
        return ("output",)  # forward returned one tensor
    if all(reference.names) and len(set(reference.names)) == len(reference.names):
        return reference.names  # type: ignore[return-value]
    return session.output_names


def comparison_findings(comparisons: list[OutputComparison], nonfinite: set[str],
                        spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    for output in dict.fromkeys(c.output for c in comparisons):
        rows = [c for c in comparisons if c.output == output]
        findings += _output_findings(output, rows, output in nonfinite, spec)
    return findings


def _output_findings(output: str, rows: list[OutputComparison], nonfinite: bool,
                     spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    shapes = [c for c in rows if c.torch_shape != c.onnx_shape]
    if shapes:
        findings.append(Finding("shape-mismatch", f'output "{output}": ' + "; ".join(
            f"batch {c.batch_size}: PyTorch {list(c.torch_shape)}, onnxruntime "
            f"{list(c.onnx_shape)}" for c in shapes)))
    dtypes = [c for c in rows if c.torch_dtype != c.onnx_dtype]
    if dtypes:
        c = dtypes[0]
        findings.append(Finding("dtype-mismatch", f'output "{output}": PyTorch {c.torch_dtype}, '
                                f"onnxruntime {c.onnx_dtype}"))
    failing = [c for c in rows if not c.passed and c.torch_shape == c.onnx_shape]
    if failing:
        findings.append(_parity_finding(output, failing, nonfinite, spec))
    return findings


def _parity_finding(output: str, failing: list[OutputComparison], nonfinite: bool,
                    spec: ModelSpec) -> Finding:
    code = "nan-or-inf" if nonfinite else "parity-mismatch"
    parts = [describe(c, spec) for c in failing]
    return Finding(code, f'output "{output}" ' + "; ".join(parts),
                   details={"batches": [c.batch_size for c in failing]})


def describe(c: OutputComparison, spec: ModelSpec) -> str:
    needed = ("no atol passes (NaN/Inf or an exact dtype where values differ)"
              if c.smallest_passing_atol is None
              else f"smallest passing atol {c.smallest_passing_atol:.3g}")
    return (f"at batch {c.batch_size}: max abs diff {_g(c.max_abs_diff)} > atol {spec.atol:g} "
            f"(rtol {spec.rtol:g}); {c.mismatched} of {c.total} elements "
            f"({c.mismatched_percent:.1f}%) outside; {needed}")


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _golden_findings(session: Session, bound: BoundInputs, golden: tuple[GoldenCase, ...],
                     spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    for case in golden:
        if not case.outputs:
            continue
        feed = dict(zip(session.input_names, case.inputs))
        try:
            actual = run_session(session, feed)
        except RuntimeFailure as error:
            findings.append(_runtime_finding(f"onnxruntime fails on {case.dataset}", error))
            continue
        for index, (expected, got) in enumerate(zip(case.outputs, actual)):
            result = compare_output(f"output_{index}", len(got) if got.ndim else 1, expected, got,
                                    spec.atol, spec.rtol)
            if not result.passed:
                findings.append(Finding("golden-mismatch", f"{case.dataset}/output_{index}.pb "
                                        + describe(result, spec).replace("at batch", "batch")))
    return findings


def _runtime_finding(what: str, error: RuntimeFailure) -> Finding:
    return Finding("runtime-error", f"{what}: {error.message}{_native(error)}",
                   evidence="\n".join(error.native) or error.message)


def _native(error: RuntimeFailure) -> str:
    return f" (onnxruntime log: {error.native[-1]})" if error.native else ""
