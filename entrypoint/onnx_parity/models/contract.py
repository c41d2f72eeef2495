"""The call contract of a model: which axis of each deployed tensor holds the batch, and what
each declared axis carries (a dimension, or a length derived from one).

This is the one home of "where is the batch": batches are cut (models/reference.py), the
dimensions found and resized (models/shapes.py), the export batch chosen (export/), frozen axes
judged (verification/frozen.py) through it. Sample files always keep axis 0 as the samples
axis; a deployed tensor holds the batch at its `batch-axis` (0 unless configured), or has none
(`"none"`: one value of the deployed shape for the whole batch, its first sample's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnx_parity.settings import Linear, ModelSpec, parse_dimension

DEFAULT_BATCH_AXIS = 0


@dataclass(frozen=True)
class Contradiction:
    """A derived axis whose committed samples do not hold the length its expression gives."""

    name: str
    axis: int
    linear: Linear
    root_length: int
    found: int


@dataclass(frozen=True)
class CallContract:
    """The deployed layout of every input and output the configuration names."""

    batch_axes: dict[str, int | None] = field(default_factory=dict)  # absent: axis 0
    axes: dict[str, dict[int, str]] = field(default_factory=dict)  # `dynamic-axes`, as written

    def batch_axis(self, name: str) -> int | None:
        """The deployed tensor's batch axis; None when it has none."""
        return self.batch_axes.get(name, DEFAULT_BATCH_AXIS)

    def batch_label(self, name: str) -> str | None:
        """The dimension name `dynamic-axes` gives the batch axis (None: not declared)."""
        axis = self.batch_axis(name)
        return None if axis is None else self.axes.get(name, {}).get(axis)

    def declares_dynamic_batch(self, names: tuple[str, ...]) -> bool:
        return any(self.batch_label(name) is not None for name in names)

    def linear(self, name: str, axis: int) -> Linear | None:
        """The expression a derived axis follows (None: a plain name, or not declared)."""
        label = self.axes.get(name, {}).get(axis)
        return None if label is None else parse_dimension(label)

    def sample_axis(self, name: str, axis: int) -> int:
        """The axis of the sample file that holds the deployed tensor's `axis`."""
        batch = self.batch_axis(name)
        if batch is None:
            return axis + 1
        if axis == batch:
            return 0
        return axis + 1 if axis < batch else axis

    def deployed_rank(self, name: str, sample_rank: int) -> int:
        return sample_rank - 1 if self.batch_axis(name) is None else sample_rank

    def cut(self, name: str, samples: np.ndarray, start: int, size: int) -> np.ndarray:
        """`size` samples from `start` (wrapping) in the deployed layout: stacked at the batch
        axis, or the first one alone for an input without a batch. Always a new array."""
        count = samples.shape[0]
        batch = self.batch_axis(name)
        if batch is None:
            return np.array(samples[start % count], copy=True)
        taken = np.take(samples, np.arange(start, start + size), axis=0, mode="wrap")
        return np.ascontiguousarray(np.moveaxis(taken, 0, batch) if batch else taken)

    def samples_of(self, deployed: list[np.ndarray], name: str) -> np.ndarray:
        """Deployed tensors (a Model Zoo folder's datasets) as samples along axis 0; the first
        dataset's alone when they do not fit together."""
        batch = self.batch_axis(name)
        if batch is not None and any(array.ndim <= batch for array in deployed):
            return np.concatenate(deployed)  # no such axis: the rank check names it
        laid = [array[None] if batch is None else np.moveaxis(array, batch, 0)
                for array in deployed]
        if any(array.shape[1:] != laid[0].shape[1:] for array in laid):
            laid = laid[:1]
        return np.concatenate(laid)

    def length(self, name: str, samples: np.ndarray, axis: int) -> int:
        """The committed length of the deployed tensor's `axis`, read from its samples."""
        return int(samples.shape[self.sample_axis(name, axis)])

    def contradictions(self, arrays: dict[str, np.ndarray]) -> list[Contradiction]:
        """Derived axes whose committed length is not their expression of the root's."""
        roots: dict[str, int] = {}
        for name, axes in self.axes.items():
            for axis, label in axes.items():
                if name in arrays and axis != self.batch_axis(name) and not parse_dimension(label):
                    length = self.length(name, arrays[name], axis)
                    roots[label] = min(roots.get(label, length), length)
        return [Contradiction(name, axis, linear, roots[linear.root], found)
                for name, axes in self.axes.items() if name in arrays
                for axis, _ in axes.items()
                if (linear := self.linear(name, axis)) is not None and linear.root in roots
                and (found := self.length(name, arrays[name], axis))
                != linear.length(roots[linear.root])]

    def batch_size_of(self, name: str, array: np.ndarray) -> int | None:
        """How many batch rows a deployed tensor holds (None: it has no batch axis)."""
        batch = self.batch_axis(name)
        if batch is None or batch >= array.ndim:
            return None
        return int(array.shape[batch])


def contract_for(spec: ModelSpec) -> CallContract:
    return CallContract(dict(spec.batch_axis), {name: dict(axes)
                                                for name, axes in spec.dynamic_axes.items()})
