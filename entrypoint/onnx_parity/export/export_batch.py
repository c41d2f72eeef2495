"""Which batch a model is exported from, and PyTorch's evidence when a dynamic batch cannot run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.locations import NOWHERE, Location, error_location
from onnx_parity.models import BoundInputs, ReferenceFailure, as_call, batch_arrays, run_reference
from onnx_parity.settings import ModelSpec

# torch.export specialises size-1 dimensions: a dynamic batch must be exported from >= 2.
DYNAMIC_EXPORT_BATCH = 2


@dataclass(frozen=True)
class HardCodedBatch:
    """PyTorch runs the model at batch 1 but not at the export batch: the batch is fixed."""

    evidence: str
    place: Location = NOWHERE  # the user's line PyTorch's traceback names


def declares_dynamic_batch(bound: BoundInputs) -> bool:
    """Some input's batch axis (its `batch-axis`, 0 by default) is declared in `dynamic-axes`."""
    return bound.contract.declares_dynamic_batch(bound.names)


def first_batch(spec: ModelSpec, bound: BoundInputs) -> int:
    """The batch PyTorch must run before anything is exported."""
    return 1 if declares_dynamic_batch(bound) else min(spec.batch_sizes)


def choose_export_batch(module: Any, bound: BoundInputs, spec: ModelSpec,
                        repo: Path) -> tuple[int, HardCodedBatch | None]:
    """The batch to export from, and PyTorch's own error when a dynamic batch cannot run.

    Raises ReferenceFailure (with its `batch_size`) when PyTorch cannot run the model on the
    samples at all: that is a problem with the model or the samples, not a frozen batch.
    """
    first = first_batch(spec, bound)
    _reference(module, bound, first)
    if not declares_dynamic_batch(bound):
        return first, None
    try:
        _reference(module, bound, DYNAMIC_EXPORT_BATCH)
    except ReferenceFailure as error:
        place = error_location(error.cause, repo)
        at = f" at {place[0]}:{place[1]}" if place[0] else ""
        return 1, HardCodedBatch(
            f"PyTorch itself cannot run the model at batch {DYNAMIC_EXPORT_BATCH}{at} while it "
            f"runs at batch 1 ({error}); batch {DYNAMIC_EXPORT_BATCH} is where a dynamic batch "
            "is exported from, whatever `batch-sizes` asks for, because torch.export fixes a "
            "dimension of size 1. The batch size is hard-coded in forward, so the model was "
            "exported from batch 1", place)
    return DYNAMIC_EXPORT_BATCH, None


def _reference(module: Any, bound: BoundInputs, size: int) -> None:
    feed = batch_arrays(bound, 0, size)
    try:
        run_reference(module, as_call(feed, bound))
    except ReferenceFailure as error:
        error.batch_size = size
        raise
