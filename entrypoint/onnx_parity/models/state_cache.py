"""What the hybrid decoder families share: a cache whose layers hold keys and values, conv
states or recurrent states, read from the model's own cache and carried flat by the step.

transformers 5.23 keeps every such model's cache in one `DynamicCache` built from its config:
a `DynamicLayer` per attention layer, a `LinearAttentionLayer` (its `conv_states[0]` and
`recurrent_states[0]`) per conv, gated-delta or mamba layer. The names and shapes are read
from that cache after a two-token prompt pass, not from config arithmetic. The step file takes
and returns them in onnxruntime-genai 0.18's names (its builder's `make_cache_names`):
`past_key_values.N.key` / `.value` for attention layer N, `past.N.conv` and `past.N.recurrent`
for the states of layer N, `present.N.*` out. A conv state is (batch, channels, kernel - 1):
transformers holds `kernel` columns, but a causal convolution of width `kernel` over the state
and the new tokens never reads the oldest one, so the file carries genai's `kernel - 1` and the
step puts a zero column in front of it for the model's code. A recurrent state is the cache's
own shape. Each family (lfm2.py, ...) says which models it takes and how the step is exported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onnx_parity.models.module_state import one_run

PROBE_TOKENS = 2  # the prompt pass the cache's layout is read from


@dataclass(frozen=True)
class StateSlot:
    """A conv or recurrent state a hybrid model's layer carries beside (or instead of) keys and
    values: `past.N.conv` -> `present.N.conv`, onnxruntime-genai's names."""

    layer: int
    kind: str  # "conv" or "recurrent"
    shape: tuple[int, ...]  # without the batch axis


@dataclass(frozen=True)
class StateFamily:
    """A hybrid decoder family: the `model_type`s it takes, and what the model needs before
    its step is exported (None: nothing)."""

    name: str
    model_types: tuple[str, ...]
    cache_argument: str = "past_key_values"  # forward's cache parameter (Mamba2: cache_params)
    prepare: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class StateLayout:
    """What the model's own cache held after a prompt pass."""

    layers: int
    kv_heads: int
    head_dim: int
    attention: tuple[int, ...]
    states: tuple[StateSlot, ...]


def read_layout(module: Any, argument: str) -> StateLayout:
    """The cache's layers after a two-token prompt pass (a trace's rules: nothing settles);
    `argument`: forward's cache parameter, the output's field that returns it."""
    import torch

    ids = torch.zeros((1, PROBE_TOKENS), dtype=torch.int64)
    with torch.no_grad(), one_run(module, eager=False):
        out = module(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    layers = getattr(out, argument).layers
    attention = tuple(index for index, layer in enumerate(layers)
                      if getattr(layer, "keys", None) is not None)
    keys = layers[attention[0]].keys if attention else None
    states = tuple(slot for index, layer in enumerate(layers) for slot in _slots(index, layer))
    return StateLayout(len(layers), int(keys.shape[1]) if keys is not None else 0,
                       int(keys.shape[3]) if keys is not None else 0, attention, states)


def _slots(index: int, layer: Any) -> list[StateSlot]:
    slots = []
    conv = (getattr(layer, "conv_states", None) or {}).get(0)
    if conv is not None:
        slots.append(StateSlot(index, "conv", (*map(int, conv.shape[1:-1]),
                                               int(conv.shape[-1]) - 1)))
    recurrent = (getattr(layer, "recurrent_states", None) or {}).get(0)
    if recurrent is not None:
        slots.append(StateSlot(index, "recurrent", tuple(map(int, recurrent.shape[1:]))))
    return slots


def fill_states(cache: Any, past: dict[str, dict[str, Any]], slots: tuple[StateSlot, ...]) -> Any:
    """The model's cache holding the step's past states (layer N's under `past["N"]`), as
    after a prompt pass: a conv state widened to the kernel by a zero column in front, a
    recurrent state copied (the model updates its cache in place, never the step's input)."""
    import torch

    for slot in slots:
        layer, value = cache.layers[slot.layer], past[str(slot.layer)][slot.kind]
        if slot.kind == "conv":
            front = torch.zeros_like(value[..., :1])
            layer.conv_states[0] = torch.cat([front, value], dim=-1)
            layer.conv_kernel_size[0] = slot.shape[-1] + 1
            layer.is_conv_states_initialized[0] = True
        else:
            layer.recurrent_states[0] = value.clone()
            layer.is_recurrent_states_initialized[0] = True
        layer.has_previous_state[0] = True
        layer.dtype, layer.device = value.dtype, value.device
    return cache


def cache_presents(cache: Any, attention: tuple[int, ...] | None,
                   slots: tuple[StateSlot, ...]) -> list[Any]:
    """The cache's tensors in the step's order (CacheShape.names): per layer its keys and
    values, then its states (a conv state's last kernel - 1 columns)."""
    presents: list[Any] = []
    for index, layer in enumerate(cache.layers):
        if attention is None or index in attention:
            presents += [layer.keys, layer.values]
        for slot in (slot for slot in slots if slot.layer == index):
            if slot.kind == "conv":
                presents.append(layer.conv_states[0][..., -slot.shape[-1]:])
            else:
                presents.append(layer.recurrent_states[0])
    return presents


@functools.cache
def _step_class() -> type:
    import torch

    class StateStep(torch.nn.Module):
        """One decoding step of a hybrid model with its cache flat: `past_key_values` (the
        attention layers' cache, built by models/call_arguments.py) and `past` (the states,
        `past.N.conv` / `.recurrent` as {"N": {"conv": ...}}) in, logits and presents out."""

        def __init__(self, model: Any, layout: tuple[tuple[int, ...], tuple[StateSlot, ...]],
                     call: tuple[bool, str]):
            super().__init__()
            self.model, self.config = model, model.config
            self.attention, self.slots = layout
            self.positions, self.argument = call
            self.training = False

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any = None,
                    past_key_values: Any = None, past: Any = None) -> tuple[Any, ...]:
            from transformers import DynamicCache

            cache = past_key_values if past_key_values is not None else DynamicCache(
                config=self.config)
            fill_states(cache, past or {}, self.slots)
            given = {"position_ids": position_ids} if self.positions else {}
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             use_cache=True, **{self.argument: cache}, **given)
            return (out.logits, *cache_presents(getattr(out, self.argument), self.attention,
                                                self.slots))

    return StateStep


def step_module(module: Any, layout: tuple[tuple[int, ...], tuple[StateSlot, ...]],
                call: tuple[bool, str]) -> Any:
    """The module a hybrid model's step is exported from (and run in PyTorch for its checks);
    `call`: whether forward takes position_ids, and its cache parameter."""
    return _step_class()(module, layout, call)
