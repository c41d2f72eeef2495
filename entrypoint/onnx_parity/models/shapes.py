"""The declared dynamic axes other than the batch, and the sizes each one is run at.

Axes that share a dimension name (`input_ids` and `attention_mask` both `1 = "sequence"`) are
one dimension and are resized together. A smaller size is the first elements of the committed
samples along that axis, so PyTorch, the reference, runs on exactly what onnxruntime gets.
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
        """The sizes other than the committed one that can be cut from the samples."""
        return tuple(size for size in self.sizes if size < self.committed)

    @property
    def too_long(self) -> tuple[int, ...]:
        """Sizes asked for that the committed samples are too short to give."""
        return tuple(size for size in self.sizes if size > self.committed)

    def subject(self) -> str:
        """How a finding names it: `"ids" axis 1 and "mask" axis 1 ("sequence")`."""
        axes = " and ".join(f'"{name}" axis {axis}' for name, axis in self.members)
        return f'{axes} ("{self.name}")'

    def axis_sizes(self, ran: tuple[int, ...]) -> dict[str, dict[int, tuple[int, ...]]]:
        return {name: {axis: ran} for name, axis in self.members}


def default_sizes(committed: int) -> tuple[int, ...]:
    """The committed size and `max(2, size // 2)`: never 1, which torch.export specialises."""
    other = max(2, committed // 2)
    return (committed,) if other == committed else (committed, other)


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
    """The feed with the dimension cut to its first `size` elements on every axis carrying it."""
    cut = dict(feed)
    for name, axis in dimension.members:
        index = [slice(None)] * cut[name].ndim
        index[axis] = slice(0, size)
        cut[name] = np.ascontiguousarray(cut[name][tuple(index)])
    return cut


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
