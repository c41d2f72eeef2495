"""A past of any length for the threshold steps, without decoding that far.

Decoding the prompts up to a threshold of 4,096 positions is slow on a real model; a built past
costs one prompt pass. PyTorch runs the prompts (their last `length` columns when the
threshold is shorter) with a cache of full layers, so its presents are the real prefix at
every layer (a sliding layer of the model's own cache would keep only its window). The past is
that prefix extended to `length` positions by keys and values drawn per layer, head and channel
with the prefix's own mean and spread, in the cache's dtype. The mask is the prompts' mask
followed by ones, so the next token's position (transformers' cumulative sum of the mask) is
consistent with it. The same arrays go to both sides: PyTorch gets them in its own cache kind,
onnxruntime as the file's past.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.models import CacheShape
from onnx_parity.verification.generation.decoding import OnnxDecoder, TorchDecoder
from onnx_parity.verification.runtime import Session

SEED = 0


@dataclass(frozen=True)
class BuiltPast:
    past: dict[str, np.ndarray]  # past_key_values.N.key / .value: (rows, kv_heads, length, dim)
    mask: np.ndarray  # (rows, length)
    token: np.ndarray  # (rows, 1): PyTorch's greedy token after the prefix
    prefix: int  # the real positions at its start

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    def described(self) -> str:
        filled = self.length - self.prefix
        return (f"PyTorch's presents of the prompts' last {self.prefix} positions"
                + (f", extended by {filled} positions drawn at their mean and spread per "
                   "layer, head and channel" if filled else "") + "; the same past to both sides")


@dataclass(frozen=True)
class PastSide:
    """What the past is built with: the model (not the export's wrapper) and its cache."""

    module: Any
    shape: CacheShape
    flat: bool
    constants: dict[str, Any]
    dtype: Any


def build_past(side: PastSide, prompts: tuple[np.ndarray, np.ndarray],
               length: int) -> BuiltPast:
    """A past of `length` positions for the prompt rows `prompts` (ids, mask)."""
    ids, mask = prompts
    prefix = min(ids.shape[1], length)
    ids, mask = ids[:, -prefix:], mask[:, -prefix:]
    cache = None if side.flat else _empty_full_cache(side)
    torch_side = TorchDecoder(side.module, side.shape, side.flat, side.constants, side.dtype,
                              cache=cache)
    output = torch_side.step(ids, mask)
    generator = np.random.default_rng(SEED)
    past = {name.replace("present", "past_key_values", 1):
            _extended(value, mask, length, generator).astype(side.dtype)
            for name, value in output.presents.items()}
    full_mask = np.concatenate([mask, np.ones((len(ids), length - prefix), dtype=np.int64)], 1)
    token = output.logits[:, -1].argmax(-1)[:, None].astype(np.int64)
    return BuiltPast(past, full_mask, token, prefix)


def _extended(value: np.ndarray, mask: np.ndarray, length: int,
              generator: np.random.Generator) -> np.ndarray:
    """(rows, kv_heads, prefix, dim) extended along axis 2 to `length`, the new positions drawn
    with the real positions' mean and standard deviation per head and channel."""
    extra = length - value.shape[2]
    if extra <= 0:
        return value
    real = value.astype(np.float64).transpose(0, 2, 1, 3)[mask > 0]  # (positions, kv, dim)
    mean, spread = real.mean(axis=0), real.std(axis=0)
    drawn = generator.standard_normal((value.shape[0], extra, *mean.shape)) * spread + mean
    return np.concatenate([value, drawn.transpose(0, 2, 1, 3).astype(value.dtype)], axis=2)


def sides(side: PastSide, session: Session, built: BuiltPast) -> tuple[TorchDecoder, OnnxDecoder]:
    """Both decoders holding the built past: PyTorch's in its own cache kind (a sliding layer
    keeps its window of it, as after a prompt pass that long), onnxruntime's as the file's."""
    import torch

    onnx_side = OnnxDecoder(session, side.shape, side.dtype, past=dict(built.past))
    tensors = [torch.from_numpy(built.past[name].copy())
               for name in side.shape.names("past_key_values")]
    if side.flat:
        return TorchDecoder(side.module, side.shape, True, side.constants, side.dtype,
                            past=tensors), onnx_side
    cache = _own_cache(side.module)
    for layer in range(side.shape.layers):
        cache.update(tensors[2 * layer], tensors[2 * layer + 1], layer)
    return TorchDecoder(side.module, side.shape, False, side.constants, side.dtype,
                        cache=cache), onnx_side


def _own_cache(module: Any) -> Any:
    """The cache the model makes itself (transformers' DynamicCache of its config's layers)."""
    from transformers import DynamicCache

    return DynamicCache(config=getattr(module, "config", None))


def _empty_full_cache(side: PastSide) -> Any:
    """A DynamicCache whose every layer keeps the whole past (its sliding layers made full)."""
    from transformers.cache_utils import DynamicLayer

    full: Any = DynamicLayer  # untyped in transformers
    cache = _own_cache(side.module)
    cache.layers[:] = [full() for _ in range(side.shape.layers)]
    return cache
