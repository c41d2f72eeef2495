"""Each declared dynamic axis other than the batch, run at its other sizes.

A graph can declare a symbolic axis and still compute for one length only (a Python loop over
`range(x.shape[1])` traced by TorchScript is unrolled for the export length). So each such
dimension runs at its other sizes, at one batch size, on cuts of the committed samples. Codes
built here: `shape-not-checked` (a size PyTorch itself cannot run, or the samples cannot give);
a failure or mismatch that only the other size shows is frozen evidence for frozen.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding
from onnx_parity.models import Dimension, ReferenceFailure, resize
from onnx_parity.results import OutputComparison
from onnx_parity.verification.cuts import Cut, CutRun
from onnx_parity.verification.frozen import FrozenEvidence
from onnx_parity.verification.outputs import merge_cuts
from onnx_parity.verification.run_failures import native_line

RunCut = Callable[[Cut], CutRun]
FeedAt = Callable[[int], dict[str, Any]]


@dataclass(frozen=True)
class DimensionOutcome:
    ran: tuple[int, ...]  # the committed size first, then every other size both sides ran
    rows: tuple[OutputComparison, ...]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class AtBatch:
    """The one batch size every dimension runs its other sizes at, and what those runs share."""

    run: RunCut
    starts: list[int]  # the start of each cut of this batch size
    feed_at: FeedAt  # a cut's feed at the committed sizes, from its start
    size: int
    committed: dict[str, int]  # every declared dimension at its committed size
    base: list[OutputComparison]  # this batch size's rows at the committed sizes
    evidence: FrozenEvidence


def run_dimension(batch: AtBatch, dimension: Dimension) -> DimensionOutcome:
    """The dimension's other sizes at the batch size, each cut resized from its committed feed."""
    ran, passed = [dimension.committed], [dimension.committed]
    rows: list[OutputComparison] = []
    notes = _unchecked_sizes(dimension)
    for length in dimension.extra:
        runs = [batch.run(Cut(resize(batch.feed_at(start), dimension, length), batch.size,
                              {**batch.committed, dimension.name: length}))
                for start in batch.starts]
        torch_failure = next((r.reference_error for r in runs if r.reference_error), None)
        if torch_failure is not None:
            notes.append(_not_checked(dimension, length, torch_failure))
            continue
        ran.append(length)
        merged = merge_cuts([row for r in runs for row in r.rows])
        rows += merged
        if _frozen_at(batch, dimension, length, runs, merged, passed):
            continue
        passed.append(length)
    return DimensionOutcome(tuple(ran), tuple(rows), tuple(notes))


def _frozen_at(batch: AtBatch, dimension: Dimension, length: int, runs: list[CutRun],
               merged: list[OutputComparison], passed: list[int]) -> bool:
    """True (and the evidence kept) when this length fails or mismatches and the committed
    length did not: the graph computes for the export length only."""
    details: FindingDetails = {"dimension": dimension.name,
                               "axes": [list(m) for m in dimension.members],
                               "passed_sizes": list(passed), "failed_size": length}
    label = f'{dimension.name} {length}'
    runtime = next((r.runtime_error for r in runs if r.runtime_error), None)
    if runtime is not None:
        batch.evidence.add_dimension(dimension.subject(), (
            f"onnxruntime fails at {label} (passed at {_sizes(passed)}; exported at "
            f"{dimension.committed}): {runtime.message}{native_line(runtime)}"), details, length)
        return True
    good = {row.output for row in batch.base if row.passed}
    failing = [row for row in merged if not row.passed and row.output in good]
    if not failing:
        return False
    worst = failing[0]
    batch.evidence.add_dimension(dimension.subject(), (
        f'the outputs differ at {label} while they match at {_sizes(passed)} (exported at '
        f'{dimension.committed}): output "{worst.output}" max abs diff '
        f"{_figure(worst.max_abs_diff)}, {worst.mismatched} of {worst.total} elements outside "
        "the tolerance"), details, length)
    return True


def _not_checked(dimension: Dimension, length: int, error: ReferenceFailure) -> Finding:
    """PyTorch itself cannot run this size: not an export defect, but not checked either."""
    name, axis = dimension.members[0]
    return Finding(
        "shape-not-checked",
        f"{dimension.subject()} was not checked at {dimension.name} {length}: PyTorch itself "
        f"cannot run the model at that size ({error}), so this is no export defect",
        evidence=str(error),
        fix=(f"Set the sizes forward accepts, e.g. `axis-sizes = {{ {name} = {{ {axis} = "
             f"[{dimension.committed}, ...] }} }}`."),
        details={"dimension": dimension.name, "size": length, "reason": "pytorch"},
    )


def _unchecked_sizes(dimension: Dimension) -> list[Finding]:
    name, axis = dimension.members[0]
    example = f"`axis-sizes = {{ {name} = {{ {axis} = [...] }} }}`"
    notes = [
        Finding("shape-not-checked",
                f"{dimension.subject()} was not checked at {dimension.name} {length}: the "
                f"committed samples are {dimension.committed} long on that axis, and a size is "
                "cut from them",
                fix=(f"Commit longer samples, or list sizes up to {dimension.committed} in "
                     f"{example}."),
                details={"dimension": dimension.name, "size": length, "reason": "samples"})
        for length in dimension.too_long
    ]
    if not dimension.extra and not dimension.too_long:
        notes.append(Finding(
            "shape-not-checked",
            f"{dimension.subject()} ran at its committed size {dimension.committed} only: "
            "no shorter size can be cut from the samples that is not 1 (a size torch.export "
            "fixes)",
            fix=f"Commit longer samples, or set the sizes in {example}.",
            details={"dimension": dimension.name, "reason": "samples"}))
    return notes


def _sizes(sizes: list[int]) -> str:
    return ", ".join(str(size) for size in sizes)


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
