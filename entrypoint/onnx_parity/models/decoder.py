"""A generating model (`generate`) as a decoder with past, in optimum's layout.

The exported file takes `input_ids` (batch, sequence), `attention_mask` (batch,
total_sequence), `position_ids` (batch, sequence) where forward takes them, and
`past_key_values.N.key` / `.value` (batch, kv_heads, past_sequence, head_dim); it returns
`logits` and `present.N.key` / `.value` (batch, kv_heads, total_sequence, head_dim). This module
says what the cache holds (from the model's config, or `cache-shape`), wraps a flat-cache
decoder (`cache = "flat"`) so that it is called like a transformers model, and synthesises the
spec and samples of one decoding step that the export stage exports as any structured call.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models import encoder_decoder, lfm2, state_cache
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.state_cache import StateFamily, StateSlot
from onnx_parity.models.vision_language import is_vision_language
from onnx_parity.settings import ModelSpec

STATE_KINDS = ("conv", "recurrent")  # a hybrid model's states (state_cache.py)
EXPORT_PAST = 3  # the past length the step is exported from (optimum exports from a few too)
EXPORT_SEQUENCE = 2  # new tokens in the exported step: above 1, which torch.export specialises
PROMPTS = ("input_ids", "attention_mask")
# The hybrid families (a cache with conv or recurrent states), by their config's model_type.
STATE_FAMILIES: tuple[StateFamily, ...] = (lfm2.FAMILY,)


@dataclass(frozen=True)
class CacheShape:
    layers: int
    kv_heads: int
    head_dim: int
    positions: bool  # forward takes position_ids
    eos: tuple[int, ...] = ()  # the end-of-sequence token(s) of the model's config
    # An encoder-decoder generator (models/encoder_decoder.py): the encoder's inputs, the
    # decoder's start token and the model's width; the cache's names then hold `.decoder`.
    encoder: tuple[str, ...] = ()
    start: int = 0
    width: int = 0
    # A hybrid model (state_cache.py): the layers holding keys and values (None: every layer),
    # and the conv and recurrent states of its other layers.
    attention: tuple[int, ...] | None = None
    states: tuple[StateSlot, ...] = ()
    cache_argument: str = "past_key_values"  # forward's cache parameter (Mamba2: cache_params)

    def names(self, prefix: str) -> tuple[str, ...]:
        """The cache's tensors layer by layer, `prefix` "past_key_values" or "present": keys
        and values, then a layer's states (`past.N.conv` beside `past_key_values.N.key`)."""
        middle = "decoder." if self.encoder else ""
        state = "past" if prefix == "past_key_values" else prefix
        return tuple(name for layer in range(self.layers) for name in (
            *(f"{prefix}.{layer}.{middle}{part}" for part in ("key", "value")
              if self.attention is None or layer in self.attention),
            *(f"{state}.{layer}.{slot.kind}" for slot in self.states if slot.layer == layer)))

    def empty_past(self, batch: int, dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        """The past of a prompt pass: no positions of keys and values, states of zeros."""
        keys = np.zeros((batch, self.kv_heads, 0, self.head_dim), dtype=dtype)
        states = {f"past.{slot.layer}.{slot.kind}": np.zeros((batch, *slot.shape), dtype=dtype)
                  for slot in self.states}
        return {name: states.get(name, keys) for name in self.names("past_key_values")}

    def past_names(self) -> dict[str, str]:
        """Each present's past: the name it is fed back as at the next step."""
        return dict(zip(self.names("present"), self.names("past_key_values"), strict=True))

    @property
    def inputs(self) -> tuple[str, ...]:
        if self.encoder:
            return ("input_ids", "encoder_hidden_states",
                    *(("encoder_attention_mask",) if "attention_mask" in self.encoder else ()),
                    *self.names("past_key_values"))
        return (*PROMPTS, *(("position_ids",) if self.positions else ()),
                *self.names("past_key_values"))

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("logits", *self.names("present"))


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


def cache_shape(module: Any, spec: ModelSpec) -> CacheShape:
    """The cache of a generating model: from `cache-shape`, else from its config."""
    assert spec.generate is not None
    positions = "position_ids" in inspect.signature(module.forward).parameters
    config: Any = getattr(module, "config", None)
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    eos = _eos(module, text)
    given = tuple(spec.inputs) if isinstance(spec.inputs, dict) else ()
    if encoder_decoder.is_encoder_decoder(module) and spec.generate.cache is None:
        sizes = encoder_decoder.decoder_sizes(module, spec)  # layers, heads, head_dim, width
        return CacheShape(*sizes[:3], False, eos, given,
                          encoder_decoder.start_token(module, spec), sizes[3])
    if not is_vision_language(module):  # a VLM's image inputs are its family's to check
        _check_prompts(spec.name, given)
    if spec.generate.cache_shape is not None:
        return CacheShape(*spec.generate.cache_shape, positions, eos)
    family = state_family(module)
    if family is not None:
        layout = state_cache.read_layout(module, family.cache_argument)
        return CacheShape(layout.layers, layout.kv_heads, layout.head_dim, positions, eos,
                          attention=layout.attention, states=layout.states,
                          cache_argument=family.cache_argument)
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or (
        getattr(text, "hidden_size", 0) // heads if heads else None)
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and isinstance(head_dim, int)):
        raise LoadError(
            f'model "{spec.name}": the cache\'s shape cannot be read from the model (its config '
            "has no num_hidden_layers, num_key_value_heads or num_attention_heads, head_dim or "
            "hidden_size).",
            fix='Add cache-shape = [layers, kv_heads, head_dim] to `generate` (with cache = '
                '"flat"), e.g. generate = { steps = 16, cache = "flat", cache-shape = [2, 2, 8] }.')
    return CacheShape(layers, kv_heads, head_dim, positions, eos)


def state_family(module: Any) -> StateFamily | None:
    """The hybrid family of a transformers model, by its config's `model_type`."""
    kind = getattr(getattr(module, "config", None), "model_type", None)
    return next((family for family in STATE_FAMILIES if kind in family.model_types), None)


def _check_prompts(model: str, given: tuple[str, ...]) -> None:
    if sorted(given) != sorted(PROMPTS):
        raise LoadError(
            f'model "{model}": `inputs` gives {", ".join(sorted(given))}, the inputs of an '
            "encoder-decoder generator, and the model is not one (its config has no "
            "is_encoder_decoder).", fix="Give a decoder's prompts as inputs = { input_ids = "
            '"samples/ids.npy", attention_mask = "samples/mask.npy" }.')


def _eos(module: Any, text: Any) -> tuple[int, ...]:
    generation = getattr(module, "generation_config", None)
    value = getattr(generation, "eos_token_id", None)
    if value is None:
        value = getattr(text, "eos_token_id", None)
    if value is None:
        return ()
    return tuple(int(item) for item in (value if isinstance(value, (list, tuple)) else [value]))


def decoder_module(module: Any, spec: ModelSpec, shape: CacheShape) -> Any:
    """The module the step is exported from and run in PyTorch: a flat-cache decoder wrapped."""
    assert spec.generate is not None
    if shape.encoder:
        return encoder_decoder.decoder_step_module(module, shape.layers)
    if shape.states:
        family = state_family(module)
        if family is not None and family.prepare is not None:
            family.prepare(module)
        return state_cache.step_module(module, (shape.attention or (), shape.states),
                                       (shape.positions, shape.cache_argument))
    if spec.generate.cache != "flat":
        return module
    return _flat_cache_class()(module, shape.positions)


def step_spec(spec: ModelSpec, shape: CacheShape) -> ModelSpec:
    """The spec of one decoding step: every axis declared, total_sequence its own dimension
    (torch.export derives a dimension from one root only), the cache on."""
    if shape.encoder:
        return dataclasses.replace(
            spec, inputs={name: Path(name) for name in shape.inputs}, outputs=shape.outputs,
            dynamic_axes=encoder_decoder.decoder_axes(shape.inputs, shape.outputs),
            forward_kwargs={})
    caches = {name: _axes(name, "past_sequence") for name in shape.names("past_key_values")}
    presents = {name: _axes(name, "total_sequence") for name in shape.names("present")}
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"},
        **({"position_ids": {0: "batch", 1: "sequence"}} if shape.positions else {}),
        **caches, "logits": {0: "batch", 1: "sequence"}, **presents}
    assert spec.generate is not None
    # A flat decoder and a hybrid model's step wrapper take no use_cache (it is always on).
    kwargs = {} if spec.generate.cache == "flat" or shape.states else {"use_cache": True}
    return dataclasses.replace(
        spec, inputs={name: Path(name) for name in shape.inputs}, dynamic_axes=axes,
        outputs=shape.outputs, forward_kwargs={**spec.forward_kwargs, **kwargs})


def _axes(name: str, sequence: str) -> dict[int, str]:
    """A cache tensor's dynamic axes: keys and values grow along axis 2, a state does not."""
    return {0: "batch"} if name.rpartition(".")[2] in STATE_KINDS else {0: "batch", 2: sequence}


def step_samples(prompts: dict[str, np.ndarray], shape: CacheShape,
                 dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
    """The exported step's samples, one per prompt: EXPORT_SEQUENCE tokens of the prompts after
    a past of EXPORT_PAST positions (random keys and values), the mask all ones."""
    if shape.encoder:
        sizes = (shape.layers, shape.kv_heads, shape.head_dim, shape.width)
        rows = len(next(iter(prompts.values())))
        return encoder_decoder.decoder_samples(rows, shape.inputs, sizes, dtype, shape.start)
    ids = np.asarray(prompts["input_ids"])
    rows, past, length = ids.shape[0], EXPORT_PAST, EXPORT_SEQUENCE
    generator = np.random.default_rng(0)
    step = {"input_ids": np.resize(ids[:, -length:], (rows, length)).astype(np.int64),
            "attention_mask": np.ones((rows, past + length), dtype=np.int64)}
    if shape.positions:
        step["position_ids"] = np.tile(np.arange(past, past + length, dtype=np.int64), (rows, 1))
    for name, empty in shape.empty_past(rows, dtype).items():
        keys = name.startswith("past_key_values.")
        size = (rows, shape.kv_heads, past, shape.head_dim) if keys else empty.shape
        step[name] = generator.standard_normal(size).astype(dtype)
    return step
