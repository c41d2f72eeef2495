"""What every decoder family shares: the cache its step takes and returns (`CacheShape`, in
optimum's names), the lengths the step is exported at, and the `DecoderFamily` Protocol each
family implements in a module of its own (listed in registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from onnx_parity.settings import ModelSpec

EXPORT_PAST = 3  # the past length the step is exported from (optimum exports from a few too)
EXPORT_SEQUENCE = 2  # new tokens in the exported step: above 1, which torch.export specialises
PROMPTS = ("input_ids", "attention_mask")
STATE_KINDS = ("conv", "recurrent")  # a hybrid model's states (state_cache.py)


@dataclass(frozen=True)
class StateSlot:
    """A conv or recurrent state a hybrid model's layer carries beside (or instead of) keys and
    values: `past.N.conv` -> `present.N.conv`, onnxruntime-genai's names (state_cache.py)."""

    layer: int
    kind: str  # one of STATE_KINDS
    shape: tuple[int, ...]  # without the batch axis


@dataclass(frozen=True)
class PastTensor:
    """One past tensor, (batch, heads, positions, width), without its batch and positions."""

    heads: int
    width: int


@dataclass(frozen=True)
class CacheShape:
    layers: int
    kv_heads: int
    head_dim: int
    positions: bool  # forward takes position_ids
    eos: tuple[int, ...] = ()  # the end-of-sequence token(s) of the model's config
    # An encoder-decoder generator (encoder_decoder.py): the encoder's inputs, the decoder's
    # start token and the model's width; the cache's names then hold `.decoder`.
    encoder: tuple[str, ...] = ()
    start: int = 0
    width: int = 0
    family: str = "dense"  # the DecoderFamily that read it, which builds the step (registry.py)
    # A hybrid model (state_cache.py): the layers holding keys and values (None: every layer),
    # the conv and recurrent states of its layers, and forward's cache parameter.
    attention: tuple[int, ...] | None = None
    states: tuple[StateSlot, ...] = ()
    cache_argument: str = "past_key_values"
    # No cache a file can carry: no past, each step runs the whole prefix (whole_prefix.py),
    # `whole_prefix_reason` says why ("forward takes no cache", or what its cache holds).
    whole_prefix: bool = False
    whole_prefix_reason: str = ""
    # Each key and value tensor's heads and width in names() order (states left out), as the
    # model's own cache holds them after a prompt pass (cache_layout.py); () where every one is
    # (kv_heads, head_dim).
    tensors: tuple[PastTensor, ...] = ()

    def names(self, prefix: str) -> tuple[str, ...]:
        """The cache's tensors layer by layer, `prefix` "past_key_values" or "present": keys
        and values, then a layer's states (`past.N.conv` beside `past_key_values.N.key`)."""
        middle = "decoder." if self.encoder else ""
        state = "past" if prefix == "past_key_values" else prefix
        return tuple(name for layer in range(self.layers) for name in (
            *(f"{prefix}.{layer}.{middle}{part}" for part in ("key", "value")
              if self.attention is None or layer in self.attention),
            *(f"{state}.{layer}.{slot.kind}" for slot in self.states if slot.layer == layer)))

    def past_shapes(self, rows: int, length: int) -> dict[str, tuple[int, ...]]:
        """Each past tensor's shape at `rows` and a past of `length` positions, by name: keys
        and values (rows, heads, length, width), as `tensors` holds them; states (rows, *shape)."""
        states = {f"past.{slot.layer}.{slot.kind}": (rows, *slot.shape) for slot in self.states}
        keys = [name for name in self.names("past_key_values") if name not in states]
        tensors = self.tensors or (PastTensor(self.kv_heads, self.head_dim),) * len(keys)
        kv = {name: (rows, tensor.heads, length, tensor.width)
              for name, tensor in zip(keys, tensors, strict=True)}
        return {name: states.get(name) or kv[name] for name in self.names("past_key_values")}

    def empty_past(self, batch: int, dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        """The past of a prompt pass: no positions of keys and values, states of zeros."""
        return {name: np.zeros(shape, dtype=dtype)
                for name, shape in self.past_shapes(batch, 0).items()}

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


class DecoderFamily(Protocol):
    """One layout of a generating model's decoder step. Modules are the user's loaded model."""

    name: str  # CacheShape.family of the shapes it reads

    def matches(self, module: Any, spec: ModelSpec) -> bool:
        """True for a model this family exports (registry.py asks the families in order)."""
        ...

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        """What the cache holds, from the model's config or `cache-shape`; its `family` is
        this family's name. Raises LoadError when the model cannot say."""
        ...

    def step_module(self, module: Any, shape: CacheShape) -> Any:
        """The module the step is exported from and run in PyTorch."""
        ...

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        """The spec of one decoding step: its inputs, outputs and every axis declared."""
        ...

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        """The exported step's samples, one per prompt."""
        ...


WHOLE_PREFIX = "whole-prefix"  # the family of a decoder with no cache a file can carry


def whole_prefix_shape(module: Any, reason: str) -> CacheShape:
    """The shape of a decoder generated by re-running its whole prefix at every step."""
    return CacheShape(0, 0, 0, False, eos(module, decoder_config(module)), family=WHOLE_PREFIX,
                      whole_prefix=True, whole_prefix_reason=reason)


def decoder_config(module: Any) -> Any:
    """The (text) decoder's config of a model, or its config, or None."""
    config: Any = getattr(module, "config", None)
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def eos(module: Any, text: Any) -> tuple[int, ...]:
    """The end-of-sequence token(s): generation_config's, else the text config's."""
    generation = getattr(module, "generation_config", None)
    value = getattr(generation, "eos_token_id", None)
    if value is None:
        value = getattr(text, "eos_token_id", None)
    if value is None:
        return ()
    return tuple(int(item) for item in (value if isinstance(value, (list, tuple)) else [value]))
