"""Float dtypes of a model and its samples: bfloat16 in numpy, and the casts of `dtype`.

numpy has no bfloat16; ml_dtypes' (a dependency of onnx) holds one, so a bfloat16 sample or
output is a numpy array of `BFLOAT16`, moved to and from torch bit for bit through int16.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
# `dtype` (settings) -> the numpy dtype samples are cast to.
NUMPY_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "bfloat16": BFLOAT16}


def is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f" or array.dtype == BFLOAT16


def to_tensor(array: np.ndarray) -> Any:
    """A torch tensor of the array's values, a copy (bfloat16 stays bfloat16)."""
    import torch

    copy = np.array(array, copy=True)
    if copy.dtype == BFLOAT16:
        return torch.from_numpy(copy.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(copy)


def to_array(tensor: Any) -> np.ndarray:
    """A tensor's values as numpy (bfloat16 as `BFLOAT16`, which `.numpy()` refuses)."""
    import torch

    plain = tensor.detach().cpu().resolve_conj().resolve_neg()
    if plain.dtype == torch.bfloat16:
        bits: np.ndarray = plain.contiguous().view(torch.int16).numpy()
        return bits.view(BFLOAT16)
    array: np.ndarray = plain.numpy()
    return array


def module_dtype(module: Any) -> str:
    """The float dtype most of the module's parameters and buffers hold (float32 when none)."""
    counts: Counter[str] = Counter()
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.is_floating_point():
            counts[str(tensor.dtype).removeprefix("torch.")] += tensor.numel()
    return counts.most_common(1)[0][0] if counts else "float32"


def cast_array(array: np.ndarray, dtype: str | None) -> np.ndarray:
    """A float array cast to `dtype` (None: as it is); other dtypes stay as they are."""
    return array.astype(NUMPY_DTYPES[dtype]) if dtype is not None and is_float(array) else array


def cast_module(module: Any, dtype: str | None) -> None:
    """The module's float parameters and buffers cast to `dtype` (None: left as built)."""
    import torch

    if dtype is not None:
        module.to(getattr(torch, dtype))
