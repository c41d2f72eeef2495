"""Lengths on the far side of what the export assumed: the guards are tested, not only noted.

A guard torch.export kept (`width < 104`, a blur whose kernel follows the image size) says the
graph is valid on one side of it; the ONNX file checks nothing. The sweep's own lengths may all
lie on the valid side. For every assumption no planned length breaks, this module finds
lengths that do, by evaluating its condition: on each side of the export length where one
exists within L/4..4L, the nearest violating length and one at least 1.5x as far from the
export length. They run like the sweep's own lengths (added to `axis-sizes` too), and the
batch's the same way as extra batch sizes, so that a failure there is explained by the guard
and a match is a note saying where it was tested.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from onnx_parity.export import ShapeAssumption
from onnx_parity.models import Dimension
from onnx_parity.verification.cuts import CutRun

FAR = 1.5  # the second length is at least this many times as far from the export length


def far_side_lengths(assumption: ShapeAssumption, length: int,
                     lowest: int = 1) -> tuple[int, ...]:
    """The lengths that break the assumption nearest `length` on each side, and one at least
    1.5x as far on the same side, within `max(lowest, L/4)`..`4L`."""
    if length < 1:
        return ()
    low, high = max(lowest, math.ceil(length / 4)), 4 * length
    found: list[int] = []
    for side in (range(length - 1, low - 1, -1), range(length + 1, high + 1)):
        found += _on_side(assumption, length, side)
    return tuple(found)


def _on_side(assumption: ShapeAssumption, length: int, side: Iterable[int]) -> list[int]:
    breaking = [n for n in side if not assumption.holds(n)]
    if not breaking:
        return []
    nearest = breaking[0]
    farther = next((n for n in breaking if abs(n - length) >= FAR * abs(nearest - length)), None)
    return [nearest] if farther is None else [nearest, farther]


def with_far_sides(dims: Sequence[Dimension],
                   assumptions: Sequence[ShapeAssumption]) -> tuple[Dimension, ...]:
    """Each dimension with the far-side lengths of its assumptions that no planned length
    breaks, after its own lengths."""
    return tuple(_widened(dimension, [a for a in assumptions if a.dimension == dimension.name])
                 for dimension in dims)


def _widened(dimension: Dimension, assumptions: list[ShapeAssumption]) -> Dimension:
    lowest = max((linear.smallest_root() for _, _, linear in dimension.derived), default=1)
    extra = [n for assumption in assumptions
             if not _broken(assumption, dimension.sizes)
             for n in far_side_lengths(assumption, dimension.committed, max(1, lowest))]
    sizes = tuple(dict.fromkeys((*dimension.sizes, *sorted(extra))))
    added = tuple(n for n in sizes if n not in dimension.sizes)
    return dimension if not added else dataclasses.replace(dimension, sizes=sizes,
                                                           far_side=added)


def _broken(assumption: ShapeAssumption, lengths: Sequence[int]) -> bool:
    return any(not assumption.holds(n) for n in lengths)


def far_side_batches(assumptions: Sequence[ShapeAssumption], labels: set[str], export_batch: int,
                     planned: Sequence[int]) -> tuple[int, ...]:
    """Batch sizes that break an assumption on the batch that no configured size breaks."""
    sizes = [n for assumption in assumptions
             if assumption.dimension in labels and not _broken(assumption, planned)
             for n in far_side_lengths(assumption, export_batch)]
    return tuple(n for n in dict.fromkeys(sizes) if n not in planned)


def failed_at(run: CutRun, good: set[str]) -> str | None:
    """What failed in a far-side run at batch `run.cut.size`: onnxruntime's error, or the first
    output that matched at the configured sizes and differs here (None: it matched)."""
    at = f"at batch {run.cut.size}"
    if run.runtime_error is not None:
        return f"onnxruntime fails {at}: {run.runtime_error.message}"
    worst = next((row for row in run.rows if not row.passed and row.output in good), None)
    if worst is None:
        return None
    return (f'the outputs differ {at}: output "{worst.output}" max abs diff '
            f"{worst.max_abs_diff:.3g}, {worst.mismatched} of {worst.total} elements outside "
            "the tolerance")


@dataclass(frozen=True)
class BatchRuns:
    """The batch as a dimension the assumptions are judged against: the sizes that ran (the
    configured ones and the far-side ones), what failed at a far-side size, what PyTorch
    itself could not run."""

    labels: tuple[str, ...]  # the batch axes' dimension names (`dynamic-axes`)
    ran: tuple[int, ...] = ()
    failed: dict[int, str] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)
