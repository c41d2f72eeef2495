"""The user's own decoder under `generate` with `cache = "flat"`: `forward(input_ids,
attention_mask, [position_ids,] *past)` returning `(logits, *presents)`, keys and values of each
layer in turn.

Its step has the dense family's names, axes and samples (dense.py), and its cache comes from
`cache-shape` (or a config it has); it is wrapped so that it is called as a transformers model is,
its `past_key_values` a DynamicCache built from the flat inputs and handed on flat.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import CacheShape, DecoderFamily
from onnx_parity.models.generating.dense import (
    decoder_cache,
    decoder_step_samples,
    decoder_step_spec,
)
from onnx_parity.settings import ModelSpec


@functools.cache
def _flat_cache_class() -> type:
    import torch

    class FlatCacheDecoder(torch.nn.Module):
        """The user's own decoder (`cache = "flat"`), called as a transformers model is: its
        `past_key_values` a DynamicCache (built from the flat inputs), handed on flat."""

        def __init__(self, decoder: Any, positions: bool):
            super().__init__()
            self.decoder, self.positions = decoder, positions
            self.training = False

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any = None,
                    past_key_values: Any = None) -> tuple[Any, ...]:
            past = [tensor for layer in past_key_values.layers
                    for tensor in (layer.keys, layer.values)]
            given = (position_ids,) if self.positions else ()
            return tuple(self.decoder(input_ids, attention_mask, *given, *past))

    return FlatCacheDecoder


class FlatCache:
    """A decoder that takes and returns its cache as flat tensors (`cache = "flat"`)."""

    name = "flat"

    def matches(self, module: Any, spec: ModelSpec) -> bool:  # noqa: ARG002
        return spec.generate is not None and spec.generate.cache == "flat"

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        return decoder_cache(module, spec, self.name)

    def step_module(self, module: Any, shape: CacheShape) -> Any:
        return _flat_cache_class()(module, shape.positions)

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        return decoder_step_spec(spec, shape, {})  # its forward takes no use_cache

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        return decoder_step_samples(prompts, shape, dtype)


FAMILY: DecoderFamily = FlatCache()  # mypy checks it against the Protocol
