"""Run the PyTorch model as the reference: batches in, flat numpy outputs back."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_parity.verification.batches import cut_batch


class ReferenceFailure(Exception):
    """PyTorch itself could not run the model on these samples; `cause` has the traceback."""

    def __init__(self, message: str, cause: BaseException):
        super().__init__(message)
        self.cause = cause


def batch_arrays(arrays: dict[str, np.ndarray], names: tuple[str, ...], start: int,
                 size: int) -> dict[str, np.ndarray]:
    return {name: np.ascontiguousarray(cut_batch(arrays[name], start, size)) for name in names}


def as_tensors(feed: dict[str, np.ndarray], names: tuple[str, ...]) -> tuple[Any, ...]:
    import torch

    return tuple(torch.from_numpy(np.array(feed[name], copy=True)) for name in names)


def run_reference(module: Any, args: tuple[Any, ...]) -> list[np.ndarray]:
    import torch

    try:
        with torch.no_grad():
            result = module(*args)
    except Exception as error:  # the user's forward failing is evidence, not a crash
        text = " ".join(str(error).split())[:600]
        raise ReferenceFailure(f"{type(error).__name__}: {text}", error) from error
    return flatten_outputs(result)


def flatten_outputs(result: Any) -> list[np.ndarray]:
    """Tensors in the order both exporters flatten them (pytree order); None leaves dropped."""
    import torch
    from torch.utils import _pytree

    leaves = _pytree.tree_leaves(result)
    return [leaf.detach().cpu().numpy() for leaf in leaves if isinstance(leaf, torch.Tensor)]
