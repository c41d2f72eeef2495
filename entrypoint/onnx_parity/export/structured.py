"""The export request of one feed: the user's module as it is, or through models' FlatCall.

A plain model (tensors in, a tensor or tuple out, no constants) is exported as it is, so the
guards, localisation and TorchScript's node sources see the user's own module. A call with
structure (constants, dotted inputs, a named output) is exported through the flat wrapper: its
inputs are the flat names, its outputs the returned structure's leaves, named after their
places (`logits`, `present.0.key`; `out_sample` for a UNet's `sample`, an input's name too)
unless `outputs` names them.
"""

from __future__ import annotations

from typing import Any

from onnx_parity.export.exporters import ExportRequest
from onnx_parity.models import (
    BoundInputs,
    ReferenceFailure,
    as_call,
    flat_inputs,
    has_structure,
    run_reference,
)
from onnx_parity.settings import ModelSpec


def export_request(module: Any, bound: BoundInputs, spec: ModelSpec,
                   feed: dict[str, Any]) -> tuple[ExportRequest, BoundInputs]:
    """The request, and how its module is called (`as_call(feed, bound)`): the user's own
    binding, or the wrapper's flat one."""
    named, names = _output_names(module, bound, feed)
    if has_structure(bound, named):
        flat = flat_inputs(module, bound)
        module, bound = flat.module, flat.bound
    args, kwargs = as_call(feed, bound)
    return ExportRequest(
        module=module, args=args, input_names=bound.names,
        output_names=spec.outputs or (_distinct(names, bound.names) if named else ()),
        dynamic_axes=spec.dynamic_axes, opset=spec.opset, kwargs=kwargs,
        parameters=tuple(bound.parameter(name) for name in bound.names),
    ), bound


def _distinct(outputs: tuple[str, ...], inputs: tuple[str, ...]) -> tuple[str, ...]:
    """An output named as an input (a UNet's `sample`) is `out_sample` in the graph, as optimum
    names it: one name cannot be both in ONNX. The report keeps the structure's name."""
    return tuple(f"out_{name}" if name in inputs else name for name in outputs)


def _output_names(module: Any, bound: BoundInputs,
                  feed: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
    """Whether forward returns a named structure, and its leaves' names when they are distinct
    (else the exporter names them)."""
    try:
        reference = run_reference(module, as_call(feed, bound))
    except ReferenceFailure:
        return False, ()  # the export then fails as PyTorch does, and says so
    names = tuple(name for name in reference.names if name)
    distinct = len(names) == len(reference.names) and len(set(names)) == len(names)
    return reference.named, names if distinct else ()
