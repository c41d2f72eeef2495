"""Which batch a model is exported from, and PyTorch's evidence when a dynamic batch cannot run."""

from __future__ import annotations

from typing import Any

from onnx_parity.models.binding import BoundInputs
from onnx_parity.models.reference import ReferenceFailure, as_tensors, batch_arrays, run_reference
from onnx_parity.settings.schema import ModelSpec

# torch.export specialises size-1 dimensions: a dynamic batch must be exported from >= 2.
DYNAMIC_EXPORT_BATCH = 2


def declares_dynamic_batch(spec: ModelSpec, bound: BoundInputs) -> bool:
    return any(0 in spec.dynamic_axes.get(name, {}) for name in bound.names)


def first_batch(spec: ModelSpec, bound: BoundInputs) -> int:
    """The batch PyTorch must run before anything is exported."""
    return 1 if declares_dynamic_batch(spec, bound) else min(spec.batch_sizes)


def choose_export_batch(module: Any, bound: BoundInputs, spec: ModelSpec) -> tuple[int, str | None]:
    """The batch to export from, and PyTorch's own error when a dynamic batch cannot run.

    Raises ReferenceFailure (with its `batch_size`) when PyTorch cannot run the model on the
    samples at all: that is a problem with the model or the samples, not a frozen batch.
    """
    first = first_batch(spec, bound)
    _reference(module, bound, first)
    if not declares_dynamic_batch(spec, bound):
        return first, None
    try:
        _reference(module, bound, DYNAMIC_EXPORT_BATCH)
    except ReferenceFailure as error:
        return 1, (f"declared dynamic, but PyTorch itself cannot run the model at batch "
                   f"{DYNAMIC_EXPORT_BATCH} ({error}) while it runs at batch 1: the batch size "
                   "is hard-coded in forward, so the model was exported from batch 1")
    return DYNAMIC_EXPORT_BATCH, None


def _reference(module: Any, bound: BoundInputs, size: int) -> None:
    feed = batch_arrays(bound.arrays, bound.names, 0, size)
    try:
        run_reference(module, as_tensors(feed, bound.names))
    except ReferenceFailure as error:
        error.batch_size = size
        raise
