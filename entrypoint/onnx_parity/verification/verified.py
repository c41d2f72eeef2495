"""The verification stage of one model: declared axes, every shape, golden outputs.

`verify_model` is the stage's entry: it runs PyTorch (the reference) and onnxruntime on the
same batches, at every batch size and every length of each declared dynamic axis, and turns what
they give into comparisons and findings, using the rules of the modules beside it. A failing
cut is kept (`Verified.failed`) so the failure can be localised node by node afterwards.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_parity.detection_results import DetectionImage
from onnx_parity.export import HardCodedBatch, ModelFacts
from onnx_parity.findings import Finding
from onnx_parity.locations import error_location
from onnx_parity.model_files import ModelFile
from onnx_parity.models import (
    BoundInputs,
    Dimension,
    GoldenCase,
    batch_arrays,
    batch_plan,
    dimensions,
)
from onnx_parity.results import DimensionLengths, OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import axis_runs, far_side, frozen
from onnx_parity.verification.cuts import Cut, CutRun, run_cut
from onnx_parity.verification.detections.findings import detection_findings
from onnx_parity.verification.far_side import with_far_sides
from onnx_parity.verification.golden import golden_findings
from onnx_parity.verification.lengths import Assumed, length_findings
from onnx_parity.verification.onnx_values import read_graph
from onnx_parity.verification.optimizer import optimizer_check
from onnx_parity.verification.outputs import (
    comparison_findings,
    count_mismatch,
    layout_notes,
    merge_cuts,
)
from onnx_parity.verification.repeats import merge_repeats
from onnx_parity.verification.run_failures import (
    load_failure_finding,
    native_line,
    reference_finding,
    runtime_finding,
)
from onnx_parity.verification.runtime import RuntimeFailure, Session, open_session
from onnx_parity.verification.self_check import self_check
from onnx_parity.verification.tracer_causes import promoted

# Each batch size runs over consecutive cuts covering every sample, up to this many cuts.
MAX_CUTS_PER_BATCH_SIZE = 8
# Failing cuts kept for a second look (other optimization levels, localisation).
MAX_FAILED_CUTS = 8


@dataclass(frozen=True)
class Exported:
    """What verification needs of the export stage's outcome."""

    model: ModelFile  # the exported files in the work folder
    facts: ModelFacts
    export_batch: int
    frozen: HardCodedBatch | None  # PyTorch's evidence of a hard-coded batch, before export
    # What the export stage found (a baked branch explains a mismatch: no tolerance fixes it).
    export_findings: tuple[Finding, ...] = ()
    # What the export assumed of the declared dimensions, judged against the lengths run.
    assumed: Assumed = field(default_factory=Assumed)


@dataclass(frozen=True)
class TorchSide:
    """PyTorch's side of the comparison: the user's module, its bound samples, and the golden
    outputs committed beside them."""

    module: Any
    bound: BoundInputs
    golden: tuple[GoldenCase, ...] = ()


@dataclass
class Verified:
    repo: Path
    bound: BoundInputs
    findings: list[Finding] = field(default_factory=list)
    comparisons: list[OutputComparison] = field(default_factory=list)
    # Outputs where NaN/Inf sits where PyTorch has another value (the nan-or-inf finding).
    nonfinite: set[str] = field(default_factory=set)
    failed: list[CutRun] = field(default_factory=list)  # failing cuts at the committed shapes
    axis_sizes: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    dimension_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    linked_axes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lengths: dict[str, DimensionLengths] = field(default_factory=dict)
    # Every cut both runtimes ran, at every shape: what deployment variants are checked on.
    runs: list[CutRun] = field(default_factory=list)
    # (an export finding, the same as verification judged it): a TracerWarning that explains
    # a failure is an error (tracer_causes.py).
    promoted: list[tuple[Finding, Finding]] = field(default_factory=list)
    # A detector's images, every run matched as detections (`[model.detections]`).
    detections: list[DetectionImage] = field(default_factory=list)

    def judged(self, findings: list[Finding]) -> list[Finding]:
        """`findings` (the model's, the export's among them) with the promoted ones replaced."""
        return [next((new for old, new in self.promoted if old is finding), finding)
                for finding in findings]


@dataclass(frozen=True)
class Runner:
    """Everything one cut needs: the model on both sides, the inputs, the rules."""

    module: Any
    session: Session
    bound: BoundInputs
    spec: ModelSpec
    export_batch: int
    ran: list[CutRun] = field(default_factory=list)

    def run(self, cut: Cut) -> CutRun:
        run = run_cut(self.module, self.session, self.bound, self.spec, cut)
        self.ran.append(run)
        return run

    def cuts(self, size: int) -> list[int]:
        """The start of each cut of this batch size (every sample covered, at most 8 cuts)."""
        plan = batch_plan(self.bound.sample_count, (size,))[:MAX_CUTS_PER_BATCH_SIZE]
        return [cut.start for cut in plan]

    def feed(self, start: int, size: int) -> dict[str, Any]:
        return batch_arrays(self.bound, start, size)


def verify_model(torch_side: TorchSide, exported: Exported, spec: ModelSpec, repo: Path,
                 threads: int = 0) -> Verified:
    """`threads`: onnxruntime's intra- and inter-op threads (0: its default, one per core)."""
    module, bound = torch_side.module, torch_side.bound
    verified = Verified(repo=repo, bound=bound)
    evidence = frozen.for_model(bound)
    verified.findings += frozen.declared_axes(exported.facts, spec, bound, evidence)
    if exported.frozen:
        evidence.add_run(exported.frozen.evidence, exported.frozen.place)
    try:
        session = open_session(exported.model.path, spec.runtime_optimization, threads)
    except RuntimeFailure as error:
        verified.findings.append(load_failure_finding(error, exported.model.path))
        verified.findings += evidence.findings()
        return verified
    runner = Runner(module, session, bound, spec, exported.export_batch)
    dims = with_far_sides(dimensions(spec, bound), exported.assumed.assumptions)
    committed = {dimension.name: dimension.committed for dimension in dims}
    for size in spec.batch_sizes:
        _run_batch_size(runner, size, committed, evidence, verified)
    verified.findings += _dimension_runs(runner, dims, exported, evidence, verified)
    verified.findings += evidence.findings()
    verified.findings += _output_findings(exported, spec, verified, module)
    verified.findings += golden_findings(session, torch_side.golden, spec)
    verified.findings += layout_notes(r for run in runner.ran for r in run.relaid)
    verified.runs = [run for run in runner.ran if run.reference and run.runtime_error is None]
    verified.detections = [image for run in runner.ran for image in run.detections]
    verified.findings += detection_findings(
        verified.detections, [run.detection_error for run in runner.ran if run.detection_error])
    verified.findings = merge_repeats(verified.findings)
    verified.promoted = promoted(exported.export_findings, verified.findings)
    return verified


def _run_batch_size(runner: Runner, size: int, committed: dict[str, int],
                    evidence: frozen.FrozenEvidence, verified: Verified) -> None:
    """Every cut of this size; the comparisons merge into one row per output."""
    rows: list[OutputComparison] = []
    for start in runner.cuts(size):
        run = runner.run(Cut(runner.feed(start, size), size, committed))
        if not _usable(run, runner, evidence, verified):
            return
        rows += run.rows
        verified.nonfinite |= run.nonfinite
        if run.failed and len(verified.failed) < MAX_FAILED_CUTS:
            verified.failed.append(run)
    verified.comparisons += merge_cuts(rows)


def _usable(run: CutRun, runner: Runner, evidence: frozen.FrozenEvidence,
            verified: Verified) -> bool:
    """False when a side could not run the cut; the evidence goes where it belongs."""
    size, other_size = run.cut.size, run.cut.size != runner.export_batch
    if run.reference_error is not None:
        if other_size:
            evidence.add_run(f"PyTorch itself fails at batch {size}: {run.reference_error}",
                             error_location(run.reference_error.cause, verified.repo), size)
        else:
            verified.findings.append(reference_finding(run.reference_error, size, verified.repo))
        return False
    if run.runtime_error is not None:
        error = run.runtime_error
        if other_size:
            evidence.add_run(f"onnxruntime fails at batch {size} (exported from batch "
                             f"{runner.export_batch}): {error.message}{native_line(error)}",
                             size=size)
        else:
            verified.findings.append(runtime_finding(f"onnxruntime fails at batch {size}", error))
        return False
    if run.reference is not None and len(run.reference.arrays) != run.onnx_count:
        verified.findings.append(count_mismatch(size, len(run.reference.arrays),
                                                runner.session.output_names))
    return True


def _dimension_runs(runner: Runner, dims: tuple[Dimension, ...], exported: Exported,
                    evidence: frozen.FrozenEvidence, verified: Verified) -> list[Finding]:
    """Each declared non-batch dimension at its other lengths, at the smallest and the largest
    batch size that ran at the committed sizes; a failing length of an axis the file fixes is
    frozen evidence, of a symbolic one a length-mismatch."""
    batches = [_at_batch(runner, size, dims, verified) for size in _sweep_batches(runner, verified)]
    findings: list[Finding] = []
    failures: list[axis_runs.LengthFailure] = []
    for dimension in dims:
        outcome = axis_runs.run_dimension(batches, dimension)
        verified.comparisons += outcome.rows
        findings += outcome.findings
        if frozen.fixed_by_file(exported.facts, dimension.members):
            axis_runs.frozen_evidence(evidence, outcome.failures)
        else:
            failures += outcome.failures
        for name, axes in dimension.axis_sizes(outcome.ran).items():
            verified.axis_sizes.setdefault(name, {}).update(axes)
        verified.dimension_sizes[dimension.name] = outcome.ran
        if linked := dimension.linked(runner.spec.dynamic_axes):
            verified.linked_axes[dimension.name] = linked
        verified.lengths[dimension.name] = DimensionLengths(outcome.ran, outcome.skipped,
                                                            dimension.far_side)
    return findings + length_findings(failures, verified.lengths, exported.assumed,
                                      exported.export_findings,
                                      _far_batches(runner, exported, verified))


def _far_batches(runner: Runner, exported: Exported, verified: Verified) -> far_side.BatchRuns:
    """The batch sizes that break an assumption on the batch, each run on the first cut at the
    committed lengths: what failed there is the assumption's evidence, not a finding of its own."""
    contract = runner.bound.contract
    labels = {label for name in runner.bound.names
              if (label := contract.batch_label(name)) is not None}
    ran = tuple(sorted({row.batch_size for row in verified.comparisons}))
    sizes = far_side.far_side_batches(exported.assumed.assumptions, labels,
                                      exported.export_batch, ran or runner.spec.batch_sizes)
    outcome = far_side.BatchRuns(tuple(sorted(labels)), ran)
    committed = {name: sizes_[0] for name, sizes_ in verified.dimension_sizes.items()}
    good = {row.output for row in verified.comparisons if row.passed}
    for size in sizes:
        run = runner.run(Cut(runner.feed(0, size), size, committed))
        if run.reference_error is not None:
            outcome.skipped[size] = f"PyTorch itself fails: {run.reference_error}"
            continue
        outcome = dataclasses.replace(outcome, ran=(*outcome.ran, size))
        what = far_side.failed_at(run, good)
        if what is not None:
            outcome.failed[size] = what
    return outcome


def _sweep_batches(runner: Runner, verified: Verified) -> list[int]:
    """The smallest and the largest batch size that both sides ran at the committed sizes
    (the first configured one when none did); a detector's detections count as ran."""
    ran = sorted({row.batch_size for row in verified.comparisons}
                 | {image.batch for run in runner.ran for image in run.detections})
    return sorted({ran[0], ran[-1]}) if ran else [runner.spec.batch_sizes[0]]


def _at_batch(runner: Runner, size: int, dims: tuple[Dimension, ...],
              verified: Verified) -> axis_runs.AtBatch:
    """Other lengths run on the first cut of the batch size: the committed length already ran
    every sample, and a length the graph gets wrong is wrong whatever the values."""
    return axis_runs.AtBatch(
        runner.run, runner.cuts(size)[:1], lambda start: runner.feed(start, size), size,
        {d.name: d.committed for d in dims},
        [row for row in verified.comparisons if row.batch_size == size])


def _output_findings(exported: Exported, spec: ModelSpec, verified: Verified,
                     module: Any) -> list[Finding]:
    """Parity at the committed shapes; drift onnxruntime's optimizer alone causes is its own,
    and an output PyTorch itself does not repeat on the same batch claims no parity."""
    committed = [row for row in verified.comparisons
                 if all(row.dimensions.get(name) == sizes[0]
                        for name, sizes in verified.dimension_sizes.items())]
    noisy = self_check(module, verified.bound, verified.failed, spec,
                       lambda: read_graph(exported.model), verified.repo)
    # No parity figure for an output PyTorch does not repeat: its only figure is the finding's.
    verified.comparisons = [row for row in verified.comparisons if row.output not in noisy.outputs]
    committed = [row for row in committed if row.output not in noisy.outputs]
    check = optimizer_check(exported.model, verified.failed, verified.bound, spec)
    findings = [*noisy.findings, *check.findings]
    explained = [*exported.export_findings, *verified.findings]
    findings += comparison_findings(committed, verified.nonfinite, spec,
                                    drifted=check.drifted, explained=explained)
    return findings
