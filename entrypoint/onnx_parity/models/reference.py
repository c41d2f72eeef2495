"""Run the PyTorch model as the reference: batches in, flat numpy outputs back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.errors import ModelProblem
from onnx_parity.models.batches import cut_batch


class ReferenceFailure(ModelProblem):
    """PyTorch itself could not run the model on these samples; `cause` has the traceback."""

    def __init__(self, message: str, cause: BaseException):
        super().__init__(message)
        self.cause = cause
        self.batch_size: int | None = None  # the batch it failed at, once a caller knows it


def batch_arrays(arrays: dict[str, np.ndarray], names: tuple[str, ...], start: int,
                 size: int) -> dict[str, np.ndarray]:
    return {name: np.ascontiguousarray(cut_batch(arrays[name], start, size)) for name in names}


def as_tensors(feed: dict[str, np.ndarray], names: tuple[str, ...]) -> tuple[Any, ...]:
    import torch

    return tuple(torch.from_numpy(np.array(feed[name], copy=True)) for name in names)


@dataclass(frozen=True)
class Reference:
    """PyTorch's outputs, flat, with names from the structure forward returned (or None)."""

    names: tuple[str | None, ...]
    arrays: tuple[np.ndarray, ...]


def run_reference(module: Any, args: tuple[Any, ...]) -> Reference:
    import torch

    try:
        with torch.no_grad():
            result = module(*args)
    except Exception as error:  # the user's forward failing is evidence, not a crash
        text = " ".join(str(error).split())[:600]
        raise ReferenceFailure(f"{type(error).__name__}: {text}", error) from error
    return flatten_outputs(result)


def flatten_outputs(result: Any) -> Reference:
    """Tensors in the order both exporters flatten them (pytree order); None leaves dropped.

    A dict or tuple output names each tensor by its place (`logits`, `rest.0`), which reads
    better in the report than the exporter's internal names (`mul`, `add_3`).
    """
    import torch
    from torch.utils import _pytree

    pairs = [(path, leaf) for path, leaf in _pytree.tree_flatten_with_path(result)[0]
             if isinstance(leaf, torch.Tensor)]
    return Reference(tuple(_path_name(path) for path, _ in pairs),
                     tuple(leaf.detach().cpu().numpy() for _, leaf in pairs))


def _path_name(path: tuple[Any, ...]) -> str | None:
    parts = [str(getattr(key, "key", getattr(key, "idx", getattr(key, "name", key))))
             for key in path]
    return ".".join(parts) or None
