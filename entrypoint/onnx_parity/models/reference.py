"""Run the PyTorch model as the reference: batches in, flat numpy outputs back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np

from onnx_parity.errors import ModelProblem
from onnx_parity.locations import shorten
from onnx_parity.models.bound_inputs import BoundInputs
from onnx_parity.models.call_arguments import structured_call
from onnx_parity.models.dtypes import to_array, to_tensor
from onnx_parity.models.module_state import one_run
from onnx_parity.models.output_tree import flatten

Call = tuple[tuple[Any, ...], dict[str, Any]]  # forward's positional and keyword arguments
# What one output is in PyTorch: a tensor, a complex tensor, or a Python number (int, float or
# bool). The exporters lay the last two out their own way; verification decides how to compare.
OutputKind: TypeAlias = Literal["tensor", "complex", "number"]


class ReferenceFailure(ModelProblem):
    """PyTorch itself could not run the model on these samples; `cause` has the traceback."""

    def __init__(self, message: str, cause: BaseException):
        super().__init__(message)
        self.cause = cause
        self.batch_size: int | None = None  # the batch it failed at, once a caller knows it


def batch_arrays(bound: BoundInputs, start: int, size: int) -> dict[str, np.ndarray]:
    """The feed of one batch, each input in its deployed layout (the call contract's)."""
    return {name: bound.contract.cut(name, bound.arrays[name], start, size)
            for name in bound.names}


def as_tensors(feed: dict[str, np.ndarray], names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(to_tensor(feed[name]) for name in names)


def as_call(feed: dict[str, np.ndarray], bound: BoundInputs) -> Call:
    """The feed as forward takes it: positional first, the rest by parameter name."""
    tensors = dict(zip(bound.names, as_tensors(feed, bound.names), strict=True))
    if bound.nested or bound.constants:  # dicts, a cache, constants: models/call_arguments.py
        return structured_call(tensors, bound)
    args = tuple(tensors[name] for name in bound.names if name not in bound.keyword)
    kwargs = {bound.parameter(name): tensors[name] for name in bound.keyword}
    return args, kwargs


@dataclass(frozen=True)
class Reference:
    """PyTorch's outputs, flat, with names from the structure forward returned (or None).

    `arrays` holds each output as PyTorch gave it: a complex tensor stays complex, a Python
    number is a 0-d array (int64, float64 or bool); `kinds` says which each one is.
    """

    names: tuple[str | None, ...]
    arrays: tuple[np.ndarray, ...]
    kinds: tuple[OutputKind, ...]
    # True when forward returned a named structure (a dict, dataclass, ModelOutput, Cache...):
    # the model is exported through models/flat_call.py, its outputs named as `names` says.
    named: bool = False


def run_reference(module: Any, call: Call) -> Reference:
    import torch

    args, kwargs = call
    try:
        with torch.no_grad(), one_run(module):
            result = module(*args, **kwargs)
    except Exception as error:  # the user's forward failing is evidence, not a crash
        text = shorten(str(error), 600)
        raise ReferenceFailure(f"{type(error).__name__}: {text}", error) from error
    return flatten_outputs(result)


def flatten_outputs(result: Any) -> Reference:
    """Tensors and Python numbers in the order both exporters flatten them; None and other
    leaves dropped (models/output_tree.py, the one place outputs are flattened).

    Each value is named by its place in the structure (`logits`, `rest.0`, `present.0.key`),
    which reads better in the report than the exporter's internal names (`mul`, `add_3`).
    """
    flat = flatten(result)
    pairs = [(name, kind, leaf) for name, leaf in zip(flat.names(), flat.leaves, strict=True)
             if (kind := _kind(leaf)) is not None]
    return Reference(tuple(name for name, _, _ in pairs),
                     tuple(_as_array(leaf) for _, _, leaf in pairs),
                     tuple(kind for _, kind, _ in pairs), named=flat.named)


def _kind(leaf: Any) -> OutputKind | None:
    import torch

    if isinstance(leaf, torch.Tensor):
        return "complex" if leaf.is_complex() else "tensor"
    return "number" if isinstance(leaf, bool | int | float) else None


def _as_array(leaf: Any) -> np.ndarray:
    import torch

    if isinstance(leaf, torch.Tensor):
        return to_array(leaf)  # bfloat16 as ml_dtypes' bfloat16: compared in float64
    return np.asarray(leaf)  # a Python number: 0-d int64, float64 or bool
