"""The declared dynamic axes other than the batch, and the sizes each one is run at.

Axes that share a dimension name (`input_ids` and `attention_mask` both `1 = "sequence"`) are
one dimension and are resized together. Another size is the committed samples repeated along
that axis, wrapping around (a shorter one is their first elements, a longer one starts over
from the first element): ids, masks and images alike, never random values, and PyTorch, the
reference, runs on exactly what onnxruntime gets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_parity.models.binding import BoundInputs
from onnx_parity.settings import ModelSpec

BATCH_AXIS = 0


@dataclass(frozen=True)
class Dimension:
    """One declared dynamic dimension other than the batch, with every axis that carries it."""

    name: str
    members: tuple[tuple[str, int], ...]  # (input, axis), in configuration order
    committed: int  # its length in the committed samples
    sizes: tuple[int, ...]  # the sizes asked for, the committed one first

    @property
    def extra(self) -> tuple[int, ...]:
        """The sizes other than the committed one, in the order they run."""
        return tuple(size for size in self.sizes if size != self.committed)

    def subject(self) -> str:
        """How a finding names it: `"ids" axis 1 and "mask" axis 1 ("sequence")`."""
        axes = " and ".join(f'"{name}" axis {axis}' for name, axis in self.members)
        return f'{axes} ("{self.name}")'

    def axis_sizes(self, ran: tuple[int, ...]) -> dict[str, dict[int, tuple[int, ...]]]:
        return {name: {axis: ran} for name, axis in self.members}


def default_sizes(committed: int) -> tuple[int, ...]:
    """The committed size L, `max(2, L // 2)`, an odd size near 3L/4 and one near 5L/4: distinct,
    never 1 (a size torch.export specialises). Halving a power of two keeps every divisibility
    that windowing, padding and striding code depends on; an odd size keeps none of them, and a
    longer one shows a table or a loop bounded by the export's length."""
    sizes = [committed, max(2, committed // 2)]
    odd = range(3, 2 * committed + 4, 2)
    sizes.append(min((n for n in odd if n not in sizes),
                     key=lambda n: (abs(n - committed * 3 / 4), -n)))
    longer = max(committed + 1, round(committed * 5 / 4))
    sizes.append(next(n for n in range(longer, longer + 4) if n not in sizes))
    return tuple(dict.fromkeys(sizes))


def dimensions(spec: ModelSpec, bound: BoundInputs) -> tuple[Dimension, ...]:
    """Every declared non-batch axis of an input, grouped by dimension name."""
    members: dict[str, list[tuple[str, int]]] = {}
    for name in bound.names:
        for axis, label in sorted(spec.dynamic_axes.get(name, {}).items()):
            if axis != BATCH_AXIS and axis < bound.arrays[name].ndim:
                members.setdefault(label, []).append((name, axis))
    return tuple(_dimension(label, tuple(axes), spec, bound) for label, axes in members.items())


def _dimension(label: str, members: tuple[tuple[str, int], ...], spec: ModelSpec,
               bound: BoundInputs) -> Dimension:
    committed = min(int(bound.arrays[name].shape[axis]) for name, axis in members)
    asked = [size for name, axis in members for size in spec.axis_sizes.get(name, {}).get(axis, ())]
    sizes = tuple(dict.fromkeys((committed, *asked))) if asked else default_sizes(committed)
    return Dimension(label, members, committed, sizes)


def resize(feed: dict[str, np.ndarray], dimension: Dimension, size: int) -> dict[str, np.ndarray]:
    """The feed with the dimension `size` long on every axis carrying it: the committed
    elements repeated along the axis, wrapping around (cut when shorter, tiled when longer)."""
    sized = dict(feed)
    for name, axis in dimension.members:
        wrapped = np.arange(size) % sized[name].shape[axis]
        sized[name] = np.ascontiguousarray(np.take(sized[name], wrapped, axis=axis))
    return sized


def input_shapes(feed: dict[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(n) for n in array.shape) for name, array in feed.items()}


def widened_for_export(feed: dict[str, np.ndarray],
                       dims: tuple[Dimension, ...]) -> dict[str, np.ndarray]:
    """The feed with every declared dimension of length 1 repeated to 2: torch.export fixes a
    dimension it sees at size 1, so a dynamic axis is never exported from 1."""
    wide = dict(feed)
    for dimension in dims:
        for name, axis in dimension.members:
            if wide[name].shape[axis] == 1:
                wide[name] = np.ascontiguousarray(np.repeat(wide[name], 2, axis=axis))
    return wide
