"""The module the exporters see when the call has structure: flat tensors in, flat tensors out.

A call has structure when forward takes constants (`forward-kwargs`), a dict or a cache built
from dotted inputs, or returns a named structure (a dict, dataclass, `ModelOutput`, a `Cache`).
Neither exporter handles all of that itself: TorchScript turns a constant keyword into a graph
input, torch.export's `dynamic_shapes` must name every keyword, and a transformers
`DynamicCache` as an output fails in `torch.onnx.export` (`SpecViolationError: Constant tensor
lifted_tensor_0 ...`, measured on torch 2.13). So the model is exported through `FlatCall`:
its forward takes the inputs as flat tensors, in the order of the ONNX inputs, builds forward's
real arguments (models/call_arguments.py), calls the user's module and returns the leaves of
the result in models/output_tree.py's order: the deployed interface, optimum's layout.

Its forward carries a generated signature (`__signature__`) whose parameters are the input
names made identifiers (`past_key_values.0.key` -> `past_key_values_0_key`): torch.export keys
`dynamic_shapes` and names its guards' sources by them (`L['past_key_values_0_key'].size()[2]`),
and `FlatInputs.bound` maps them back to the ONNX names for the guard reader.
A plain model (tensors in, a tensor or a tuple out, no constants) is exported as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import keyword
import re
from dataclasses import dataclass
from typing import Any

from onnx_parity.models.bound_inputs import BoundInputs
from onnx_parity.models.call_arguments import structured_call
from onnx_parity.models.output_tree import flatten


@dataclass(frozen=True)
class FlatInputs:
    """The wrapper to export and how it is called: `bound` binds the same input names, by
    position, to the wrapper's generated parameters (`as_call(feed, bound)` is its call)."""

    module: Any  # FlatCall, a torch.nn.Module holding the user's module as `model`
    bound: BoundInputs


def has_structure(bound: BoundInputs, named_output: bool) -> bool:
    return bool(bound.nested or bound.constants or named_output)


def flat_inputs(module: Any, bound: BoundInputs) -> FlatInputs:
    parameters = identifiers(bound.names)
    flat = BoundInputs(bound.names, bound.arrays, parameters=parameters,
                       positional_note=bound.positional_note)
    return FlatInputs(_flat_call_class()(module, bound, parameters), flat)


def identifiers(names: tuple[str, ...]) -> tuple[str, ...]:
    """Each name as a distinct Python identifier (never `self` or a keyword), kept when it
    is one."""
    found: list[str] = []
    for name in names:
        base = re.sub(r"\W", "_", name)
        if not base or base[0].isdigit() or base == "self" or keyword.iskeyword(base):
            base = f"_{base}"
        candidate, count = base, 1
        while candidate in found:
            count += 1
            candidate = f"{base}_{count}"
        found.append(candidate)
    return tuple(found)


@functools.cache
def _flat_call_class() -> type:
    import torch

    class FlatCall(torch.nn.Module):
        """forward(*flat tensors) -> the user's forward's leaves, as a flat tuple."""

        def __init__(self, model: Any, bound: BoundInputs, parameters: tuple[str, ...]):
            super().__init__()
            self.model = model
            # The model's mode, not a new module's training mode: TorchScript's export switches
            # the wrapper to eval and back, and train() back would reach the model's Dropout.
            self.training = bool(getattr(model, "training", False))
            self._bound = dataclasses.replace(bound, arrays={})  # the call's shape, no samples
            signature = inspect.Signature([
                inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                for name in parameters])

            def forward(*flat: Any) -> tuple[Any, ...]:
                return self.call(*flat)

            vars(forward)["__signature__"] = signature  # what inspect.signature reads
            self.forward = forward

        def call(self, *flat: Any) -> tuple[Any, ...]:
            tensors = dict(zip(self._bound.names, flat, strict=True))
            args, kwargs = structured_call(tensors, self._bound)
            return tuple(flatten(self.model(*args, **kwargs)).leaves)

    return FlatCall
