"""A transformers decoder (a `...ForCausalLM`, or a vision-language model's text decoder) under
`generate`, as a decoder with past in optimum's layout.

The exported file takes `input_ids` (batch, sequence), `attention_mask` (batch,
total_sequence), `position_ids` (batch, sequence) where forward takes them, and
`past_key_values.N.key` / `.value` (batch, heads, past_sequence, width); it returns `logits`
and `present.N.key` / `.value` (batch, heads, total_sequence, width). This module says what the
cache holds (what the model's own cache holds after a prompt pass, cache_layout.py; a flat-cache
decoder's from its config or `cache-shape`) and synthesises the spec
and samples of one decoding step that the export stage exports as any structured call; the
flat-cache family (flat_cache.py) shares all three.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import (
    EXPORT_PAST,
    EXPORT_SEQUENCE,
    PROMPTS,
    CacheShape,
    DecoderFamily,
    decoder_config,
    eos,
)
from onnx_parity.models.generating.cache_layout import cache_tensors
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_config import is_vision_language
from onnx_parity.settings import ModelSpec


def decoder_cache(module: Any, spec: ModelSpec, family: str) -> CacheShape:
    """The cache of a decoder with past: from `cache-shape`, else what its own cache holds
    after a prompt pass (a flat-cache decoder, which takes its cache as inputs: its config)."""
    assert spec.generate is not None
    positions = "position_ids" in inspect.signature(module.forward).parameters
    text = decoder_config(module)
    given = tuple(spec.inputs) if isinstance(spec.inputs, dict) else ()
    if not is_vision_language(module):  # a VLM's image inputs are its family's to check
        check_prompts(spec.name, given)
    if spec.generate.cache_shape is not None:
        return CacheShape(*spec.generate.cache_shape, positions, eos(module, text),
                          family=family)
    if spec.generate.cache != "flat":
        tensors = cache_tensors(module, spec.name, spec.forward_kwargs)
        return CacheShape(len(tensors) // 2, tensors[0].heads, tensors[0].width, positions,
                          eos(module, text), family=family, tensors=tensors)
    return _from_config(spec.name, text, (positions, eos(module, text)), family)


def _from_config(model: str, text: Any, call: tuple[bool, tuple[int, ...]],
                 family: str) -> CacheShape:
    """A flat-cache decoder's cache from its config's heads and head size; without them the
    LoadError asks for `cache-shape`. `call`: whether forward takes positions, its eos."""
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or (
        getattr(text, "hidden_size", 0) // heads if heads else None)
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and isinstance(head_dim, int)):
        raise LoadError(
            f'model "{model}": the cache\'s shape cannot be read from the model (its config '
            "has no num_hidden_layers, num_key_value_heads or num_attention_heads, head_dim or "
            "hidden_size).",
            fix='Add cache-shape = [layers, kv_heads, head_dim] to `generate` (with cache = '
                '"flat"), e.g. generate = { steps = 16, cache = "flat", cache-shape = [2, 2, 8] }.')
    return CacheShape(layers, kv_heads, head_dim, *call, family=family)


def check_prompts(model: str, given: tuple[str, ...]) -> None:
    if sorted(given) != sorted(PROMPTS):
        raise LoadError(
            f'model "{model}": `inputs` gives {", ".join(sorted(given))}, the inputs of an '
            "encoder-decoder generator, and the model is not one (its config has no "
            "is_encoder_decoder).", fix="Give a decoder's prompts as inputs = { input_ids = "
            '"samples/ids.npy", attention_mask = "samples/mask.npy" }.')


def decoder_step_spec(spec: ModelSpec, shape: CacheShape, kwargs: dict[str, bool]) -> ModelSpec:
    """The spec of one decoding step: every axis declared, total_sequence its own dimension
    (torch.export derives a dimension from one root only); `kwargs` added to forward-kwargs."""
    caches = {name: {0: "batch", 2: "past_sequence"} for name in shape.names("past_key_values")}
    presents = {name: {0: "batch", 2: "total_sequence"} for name in shape.names("present")}
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"},
        **({"position_ids": {0: "batch", 1: "sequence"}} if shape.positions else {}),
        **caches, "logits": {0: "batch", 1: "sequence"}, **presents}
    return dataclasses.replace(
        spec, inputs={name: Path(name) for name in shape.inputs}, dynamic_axes=axes,
        outputs=shape.outputs, forward_kwargs={**spec.forward_kwargs, **kwargs})


def decoder_step_samples(prompts: dict[str, np.ndarray], shape: CacheShape,
                         dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
    """The exported step's samples, one per prompt: EXPORT_SEQUENCE tokens of the prompts after
    a past of EXPORT_PAST positions (random keys and values), the mask all ones."""
    ids = np.asarray(prompts["input_ids"])
    rows, past, length = ids.shape[0], EXPORT_PAST, EXPORT_SEQUENCE
    generator = np.random.default_rng(0)
    step = {"input_ids": np.resize(ids[:, -length:], (rows, length)).astype(np.int64),
            "attention_mask": np.ones((rows, past + length), dtype=np.int64)}
    if shape.positions:
        step["position_ids"] = np.tile(np.arange(past, past + length, dtype=np.int64), (rows, 1))
    for name, sizes in shape.past_shapes(rows, past).items():
        step[name] = generator.standard_normal(sizes).astype(dtype)
    return step


class Dense:
    """A transformers decoder, exported as the user built it with its cache on."""

    name = "dense"

    def matches(self, module: Any, spec: ModelSpec) -> bool:  # noqa: ARG002
        return True  # the last family asked: any decoder the others leave

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        return decoder_cache(module, spec, self.name)

    def step_module(self, module: Any, shape: CacheShape) -> Any:  # noqa: ARG002
        return module

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        return decoder_step_spec(spec, shape, {"use_cache": True})

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        return decoder_step_samples(prompts, shape, dtype)


FAMILY: DecoderFamily = Dense()  # mypy checks it against the Protocol
