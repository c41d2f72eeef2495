"""Each declared dynamic axis other than the batch, run at its other lengths.

A graph can declare a symbolic axis and still compute for one length only (a Python loop over
`range(x.shape[1])` traced by TorchScript is unrolled for the export length; a window or a
padding to a multiple of 8 baked in for the export's image size). So each such dimension runs
at its other lengths (models/shapes.py builds them by repeating the committed samples along the
axis), one dimension at a time with the others at their committed lengths, at the smallest and
the largest batch size, each on the first cut of the samples of that batch size (the committed
length ran every sample; a length the graph gets wrong is wrong whatever the values). Built here:
`shape-not-checked` (a length PyTorch itself cannot run is skipped). A failure or mismatch that
only another length shows is a `LengthFailure`: frozen evidence (frozen.py) when the exported
file fixes the dimension, else lengths.py's `length-mismatch`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from onnx_parity.verification.runtime import RuntimeFailure

RunCut = Callable[[Cut], CutRun]
FeedAt = Callable[[int], dict[str, Any]]


@dataclass(frozen=True)
class AtBatch:
    """One batch size the dimensions run their other lengths at, and what those runs share."""

    run: RunCut
    starts: list[int]  # the start of each cut of this batch size the other lengths run on
    feed_at: FeedAt  # a cut's feed at the committed sizes, from its start
    size: int
    committed: dict[str, int]  # every declared dimension at its committed size
    base: list[OutputComparison]  # this batch size's rows at the committed sizes


@dataclass(frozen=True)
class LengthFailure:
    """A length at which onnxruntime fails, or outputs that match at the committed length
    differ; `batches` are the batch sizes that show it, the evidence is the first one's."""

    dimension: Dimension
    length: int
    batches: tuple[int, ...]
    passed: tuple[int, ...]  # every length of the dimension that ran clean
    runtime: RuntimeFailure | None = None
    worst: OutputComparison | None = None  # the first output that differs, when it ran

    def details(self) -> FindingDetails:
        return {"dimension": self.dimension.name,
                "axes": [list(member) for member in self.dimension.members],
                "passed_sizes": list(self.passed), "failed_size": self.length}

    def what(self, native: bool = True) -> str:
        """What happened, in one clause: `onnxruntime fails at time 12 (batch 1, 8; ...): ...`,
        with onnxruntime's last native log line unless `native` is False."""
        at = f"{self.dimension.name} {self.length}"
        ran = (f"batch {_sizes(self.batches)}; runs clean at {_sizes(self.passed)}; exported at "
               f"{self.dimension.committed}")
        if self.runtime is not None:
            return (f"onnxruntime fails at {at} ({ran}): {self.runtime.message}"
                    + (native_line(self.runtime) if native else ""))
        worst = self.worst
        assert worst is not None  # a failure is a runtime error or a differing output
        return (f'the outputs differ at {at} ({ran}): output "{worst.output}" max abs diff '
                f"{_figure(worst.max_abs_diff)}, {worst.mismatched} of {worst.total} elements "
                "outside the tolerance" + _shapes(worst))


@dataclass(frozen=True)
class DimensionOutcome:
    ran: tuple[int, ...]  # the committed length first, then every other length both sides ran
    rows: tuple[OutputComparison, ...]
    findings: tuple[Finding, ...]  # a note per length skipped
    skipped: dict[int, str]  # a length skipped -> why
    failures: tuple[LengthFailure, ...]


def run_dimension(batches: Sequence[AtBatch], dimension: Dimension) -> DimensionOutcome:
    """The dimension's other lengths at each batch size, each cut resized from its feed."""
    ran, rows, notes, skipped = [dimension.committed], [], [], {}
    failing: list[tuple[int, list[tuple[AtBatch, list[CutRun], list[OutputComparison]]]]] = []
    for length in dimension.extra:
        runs = [(batch, _runs(batch, dimension, length)) for batch in batches]
        torch_failure = next((r.reference_error for _, cut_runs in runs for r in cut_runs
                              if r.reference_error), None)
        if torch_failure is not None:
            if length not in dimension.optional:  # a length tried unasked goes unremarked
                notes.append(_not_checked(dimension, length, torch_failure))
            skipped[length] = f"PyTorch itself fails: {torch_failure}"
            continue
        ran.append(length)
        merged = [(batch, cut_runs, merge_cuts([row for r in cut_runs for row in r.rows]))
                  for batch, cut_runs in runs]
        rows += [row for _, _, batch_rows in merged for row in batch_rows]
        failing.append((length, merged))
    failures = [failure for length, merged in failing
                if (failure := _failure(dimension, length, merged)) is not None]
    passed = tuple(length for length in ran if length not in {f.length for f in failures})
    failures = [_with_passed(failure, passed) for failure in failures]
    return DimensionOutcome(tuple(ran), tuple(rows), tuple(notes), skipped, tuple(failures))


def frozen_evidence(evidence: FrozenEvidence, failures: Sequence[LengthFailure]) -> None:
    """A dimension the exported file fixes: each failing length is evidence that it is fixed."""
    for failure in failures:
        evidence.add_dimension(failure.dimension.subject(), failure.what(), failure.details(),
                               failure.length)


def _runs(batch: AtBatch, dimension: Dimension, length: int) -> list[CutRun]:
    sizes = {**batch.committed, dimension.name: length}
    return [batch.run(Cut(resize(batch.feed_at(start), dimension, length), batch.size, sizes))
            for start in batch.starts]


def _failure(dimension: Dimension, length: int,
             merged: list[tuple[AtBatch, list[CutRun], list[OutputComparison]]]
             ) -> LengthFailure | None:
    """This length fails or mismatches at some batch size where the committed length did not:
    the graph computes for the export length only."""
    found = [(batch, failure) for batch, runs, rows in merged
             if (failure := _at_batch(batch, dimension, length, runs, rows)) is not None]
    if not found:
        return None
    first = found[0][1]
    return LengthFailure(dimension, length, tuple(batch.size for batch, _ in found), (),
                         first.runtime, first.worst)


def _at_batch(batch: AtBatch, dimension: Dimension, length: int, runs: list[CutRun],
              rows: list[OutputComparison]) -> LengthFailure | None:
    runtime = next((r.runtime_error for r in runs if r.runtime_error), None)
    if runtime is not None:
        return LengthFailure(dimension, length, (batch.size,), (), runtime=runtime)
    good = {row.output for row in batch.base if row.passed}
    worst = next((row for row in rows if not row.passed and row.output in good), None)
    return None if worst is None else LengthFailure(dimension, length, (batch.size,), (),
                                                    worst=worst)


def _with_passed(failure: LengthFailure, passed: tuple[int, ...]) -> LengthFailure:
    return LengthFailure(failure.dimension, failure.length, failure.batches, passed,
                         failure.runtime, failure.worst)


def _not_checked(dimension: Dimension, length: int, error: ReferenceFailure) -> Finding:
    """PyTorch itself cannot run this length: not an export defect, but not checked either."""
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


def _shapes(row: OutputComparison) -> str:
    if row.torch_shape == row.onnx_shape:
        return ""
    return (f" (PyTorch {_shape(row.torch_shape)}, onnxruntime {_shape(row.onnx_shape)})")


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _sizes(sizes: Sequence[int]) -> str:
    return ", ".join(str(size) for size in sizes)


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
