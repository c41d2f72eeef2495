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

from onnx_parity.models.bound_inputs import BoundInputs
from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings import Linear, ModelSpec, parse_dimension


@dataclass(frozen=True)
class Dimension:
    """One declared dynamic dimension other than the batch, with every axis that carries it:
    by its name, or as a length derived from it (`attention_mask` axis 1 = `past + 1`)."""

    name: str
    members: tuple[tuple[str, int], ...]  # (input, axis), in configuration order
    committed: int  # its length in the committed samples
    sizes: tuple[int, ...]  # the sizes asked for, the committed one first
    # (input, axis, expression): axes whose length follows this dimension's
    derived: tuple[tuple[str, int, Linear], ...] = ()
    # lengths the sweep tries of its own accord (1): where PyTorch cannot run one, it is
    # skipped without a note, since nobody asked for it
    optional: tuple[int, ...] = ()
    # lengths added because they break what the export assumed (verification/far_side.py)
    far_side: tuple[int, ...] = ()

    @property
    def extra(self) -> tuple[int, ...]:
        """The sizes other than the committed one, in the order they run."""
        return tuple(size for size in self.sizes if size != self.committed)

    def subject(self) -> str:
        """How a finding names it: `"ids" axis 1 and "mask" axis 1 ("sequence")`."""
        axes = " and ".join(f'"{name}" axis {axis}' for name, axis in self.members)
        linked = "".join(f', "{name}" axis {axis} = {linear}'
                         for name, axis, linear in self.derived)
        return f'{axes} ("{self.name}"{linked})'

    def axis_sizes(self, ran: tuple[int, ...]) -> dict[str, dict[int, tuple[int, ...]]]:
        sizes = {name: {axis: ran} for name, axis in self.members}
        for name, axis, linear in self.derived:
            sizes.setdefault(name, {})[axis] = tuple(linear.length(size) for size in ran)
        return sizes

    def linked(self, spec_axes: dict[str, dict[int, str]]) -> tuple[str, ...]:
        """Every axis, of an input or an output, whose length follows this dimension:
        `attention_mask axis 1 = past + 1`."""
        return tuple(f"{name} axis {axis} = {linear}" for name, axes in spec_axes.items()
                     for axis, label in sorted(axes.items())
                     if (linear := parse_dimension(label)) and linear.root == self.name)


def default_sizes(committed: int, smallest: int = 1) -> tuple[int, ...]:
    """The committed size L, `max(2, L // 2)`, an odd size near 3L/4, one near 5L/4, then 1:
    distinct. Halving a power of two keeps every divisibility that windowing, padding and
    striding code depends on; an odd size keeps none of them, and a longer one shows a table or
    a loop bounded by the export's length. 1 is what deployments send most (one token, one
    point, one frame) and where broadcasting changes meaning; the export is never made at 1
    (torch.export specialises it), but the exported graph runs there. A dimension that others
    derive from runs no shorter than its committed length allows them (`smallest`)."""
    if committed < 1:
        return (committed,)  # nothing to repeat: an empty axis runs as committed
    sizes = [committed, max(2, smallest, committed // 2)]
    odd = range(3, 2 * committed + 4, 2)
    sizes.append(min((n for n in odd if n not in sizes),
                     key=lambda n: (abs(n - committed * 3 / 4), -n)))
    longer = max(committed + 1, round(committed * 5 / 4))
    sizes.append(next(n for n in range(longer, longer + 4) if n not in sizes))
    if smallest <= 1:
        sizes.append(1)
    return tuple(dict.fromkeys(sizes))


def dimensions(spec: ModelSpec, bound: BoundInputs) -> tuple[Dimension, ...]:
    """Every declared non-batch axis of an input, grouped by dimension name; an axis derived
    from a dimension joins that dimension."""
    members: dict[str, list[tuple[str, int]]] = {}
    derived: dict[str, list[tuple[str, int, Linear]]] = {}
    contract = bound.contract
    for name in bound.names:
        rank = contract.deployed_rank(name, bound.arrays[name].ndim)
        for axis, label in sorted(spec.dynamic_axes.get(name, {}).items()):
            if axis == contract.batch_axis(name) or axis >= rank:
                continue
            linear = parse_dimension(label)
            if linear is None:
                members.setdefault(label, []).append((name, axis))
            else:
                derived.setdefault(linear.root, []).append((name, axis, linear))
    _check_roots(spec, derived, members)
    return tuple(_dimension(label, tuple(axes), tuple(derived.get(label, ())), spec, bound)
                 for label, axes in members.items())


def _check_roots(spec: ModelSpec, derived: dict[str, list[tuple[str, int, Linear]]],
                 members: dict[str, list[tuple[str, int]]]) -> None:
    orphans = [(name, axis, linear) for root, axes in derived.items() if root not in members
               for name, axis, linear in axes]
    if orphans:
        name, axis, linear = orphans[0]
        raise LoadError(
            f'model "{spec.name}": input "{name}" axis {axis} is declared "{linear}", but no '
            f'input of the samples carries "{linear.root}" on a non-batch axis.',
            fix=f'Declare "{linear.root}" on an axis of an input the samples give.')


def _dimension(label: str, members: tuple[tuple[str, int], ...],
               derived: tuple[tuple[str, int, Linear], ...], spec: ModelSpec,
               bound: BoundInputs) -> Dimension:
    committed = min(bound.contract.length(name, bound.arrays[name], axis)
                    for name, axis in members)
    asked = [size for name, axis in members for size in spec.axis_sizes.get(name, {}).get(axis, ())]
    smallest = max((linear.smallest_root() for _, _, linear in derived), default=0)
    sizes = (tuple(dict.fromkeys((committed, *asked))) if asked
             else default_sizes(committed, smallest))
    optional = () if asked or committed == 1 else tuple(n for n in sizes if n == 1)
    return Dimension(label, members, committed, sizes, derived, optional)


def resize(feed: dict[str, np.ndarray], dimension: Dimension, size: int) -> dict[str, np.ndarray]:
    """The feed with the dimension `size` long on every axis carrying it, and each axis derived
    from it as long as its expression says: the committed elements repeated along the axis,
    wrapping around (cut when shorter, tiled when longer).

    A shorter length is the first elements; but a line of a 0/1 input (a mask) that this leaves
    with nothing but 0 takes its last elements instead: a left-padded prompt's first positions
    are all padding, and a row with every position masked is no input a deployment sends
    (PyTorch and the graph fill such a row differently)."""
    sized = dict(feed)
    lengths = [(name, axis, size) for name, axis in dimension.members]
    lengths += [(name, axis, linear.length(size)) for name, axis, linear in dimension.derived]
    for name, axis, length in lengths:
        if sized[name].shape[axis] == 0:
            continue  # an empty axis has nothing to repeat
        first = _cut(sized[name], axis, length, from_end=False)
        sized[name] = _unemptied(sized[name], axis, length, first)
    return sized


def _cut(array: np.ndarray, axis: int, length: int, from_end: bool) -> np.ndarray:
    committed = array.shape[axis]
    start = committed - length if from_end and length < committed else 0
    return np.ascontiguousarray(np.take(array, (start + np.arange(length)) % committed,
                                        axis=axis))


def _unemptied(array: np.ndarray, axis: int, length: int, first: np.ndarray) -> np.ndarray:
    """`first`, with each line of a 0/1 array it left all 0 taken from the end instead."""
    if array.dtype.kind not in "biu" or length >= array.shape[axis] or \
            not np.isin(array, (0, 1)).all():
        return first
    emptied = ~first.astype(bool).any(axis=axis, keepdims=True)
    if not emptied.any():
        return first
    return np.ascontiguousarray(np.where(emptied, _cut(array, axis, length, True), first))


def input_shapes(feed: dict[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(n) for n in array.shape) for name, array in feed.items()}


def widened_for_export(feed: dict[str, np.ndarray],
                       dims: tuple[Dimension, ...]) -> dict[str, np.ndarray]:
    """The feed with every declared dimension of length 1 repeated to 2: torch.export fixes a
    dimension it sees at size 1, so a dynamic axis is never exported from 1."""
    wide = dict(feed)
    for dimension in dims:
        if any(wide[name].shape[axis] == 1 for name, axis in dimension.members):
            wide = resize(wide, dimension, 2)
    return wide
