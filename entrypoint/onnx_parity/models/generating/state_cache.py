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
own shape. Each family (lfm2.py, gated_delta.py, mamba_hybrid.py, mamba2.py) is a `StateFamily`: the
models it takes and what the model needs before its step is exported.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import (
    STATE_KINDS,
    CacheShape,
    StateSlot,
    decoder_config,
    eos,
)
from onnx_parity.models.generating.dense import (
    check_prompts,
    decoder_step_samples,
    decoder_step_spec,
)
from onnx_parity.models.module_state import one_run
from onnx_parity.settings import EXPORTERS, ModelSpec

PROBE_TOKENS = 2  # the prompt pass the cache's layout is read from
TORCHSCRIPT_FIRST = ("torchscript", "dynamo")


@dataclass  # not frozen: DecoderFamily's `name` is a plain attribute
class StateFamily:
    """A hybrid decoder family (a `DecoderFamily`): the `model_type`s it takes, forward's cache
    parameter, and what the model needs before its step is exported (None: nothing)."""

    name: str
    model_types: tuple[str, ...]
    cache_argument: str = "past_key_values"  # Mamba2: cache_params
    prepare: Callable[[Any], None] | None = None
    # The exporters tried first when the user leaves `exporter` to "auto" (a chunked scan that
    # dynamo specialises at the export's length goes to TorchScript first).
    exporters: tuple[str, ...] = EXPORTERS

    def matches(self, module: Any, spec: ModelSpec) -> bool:
        kind = getattr(getattr(module, "config", None), "model_type", None)
        return kind in self.model_types and spec.generate is not None \
            and spec.generate.cache is None

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        check_prompts(spec.name, tuple(spec.inputs) if isinstance(spec.inputs, dict) else ())
        layout = read_layout(module, self.cache_argument)
        positions = "position_ids" in inspect.signature(module.forward).parameters
        return CacheShape(layout.layers, layout.kv_heads, layout.head_dim, positions,
                          eos(module, decoder_config(module)), family=self.name,
                          attention=layout.attention, states=layout.states,
                          cache_argument=self.cache_argument)

    def step_module(self, module: Any, shape: CacheShape) -> Any:
        if self.prepare is not None:
            self.prepare(module)
        return _step_class()(module, (shape.attention or (), shape.states),
                             (shape.positions, shape.cache_argument))

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        """The dense step's, a state's axes only its batch; no use_cache (the step's is on)."""
        step = decoder_step_spec(spec, shape, {})
        states = {name: {0: "batch"} for name in step.dynamic_axes if is_state(name)}
        exporters = self.exporters if spec.exporters == EXPORTERS else spec.exporters
        return dataclasses.replace(step, dynamic_axes={**step.dynamic_axes, **states},
                                   exporters=exporters)

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        """The dense step's samples, each past state drawn at its own shape."""
        step = decoder_step_samples(prompts, shape, dtype)
        generator = np.random.default_rng(1)
        for name, empty in shape.empty_past(len(step["input_ids"]), dtype).items():
            if is_state(name):
                step[name] = generator.standard_normal(empty.shape).astype(dtype)
        return step


def is_state(name: str) -> bool:
    """A hybrid model's conv or recurrent state (`past.N.conv`), not keys or values."""
    return name.rpartition(".")[2] in STATE_KINDS


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


