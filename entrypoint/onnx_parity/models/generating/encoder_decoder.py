"""An encoder-decoder generator (BART, T5, Whisper, Marian) under `generate`, in optimum's
two-file layout.

`<name>.encoder.onnx` takes the committed encoder inputs (`input_ids` and `attention_mask`, or
Whisper's `input_features`) and returns `last_hidden_state`. The decoder `<name>.onnx` takes
`input_ids` (the decoder's tokens), `encoder_hidden_states`, `encoder_attention_mask` where the
encoder takes a mask, and the self-attention past `past_key_values.N.decoder.key` / `.value`;
it returns `logits` and `present.N.decoder.key` / `.value`. The encoder's output is fed at every
step (the cross-attention keys and values are recomputed from it: the simpler of optimum's two
layouts, and the one issue 23 allows).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import CacheShape, DecoderFamily, decoder_config, eos
from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings import ModelSpec

ENCODER_OUTPUT = "last_hidden_state"
EXPORT_ENCODER = 5  # encoder positions of the exported decoder step's sample


def is_encoder_decoder(module: Any) -> bool:
    return bool(getattr(getattr(module, "config", None), "is_encoder_decoder", False))


def decoder_sizes(module: Any, spec: ModelSpec) -> tuple[int, int, int, int]:
    """The decoder's layers, heads, head size and the model's width, from its config."""
    config: Any = module.config
    layers = getattr(config, "decoder_layers", None) or getattr(config, "num_decoder_layers", None)
    heads = (getattr(config, "decoder_attention_heads", None)
             or getattr(config, "num_heads", None))
    width = getattr(config, "d_model", None)
    head_dim = getattr(config, "d_kv", None) or (width // heads if width and heads else None)
    sizes = (layers, heads, head_dim, width)
    if not all(isinstance(size, int) for size in sizes):
        raise LoadError(
            f'model "{spec.name}": the decoder\'s cache cannot be read from the model\'s config '
            "(decoder_layers or num_decoder_layers, decoder_attention_heads or num_heads, "
            "d_model).", fix="Give the model a transformers encoder-decoder config (BART, T5, "
            "Whisper, Marian).")
    return layers, heads, head_dim, width  # type: ignore[return-value]


def start_token(module: Any, spec: ModelSpec) -> int:
    """The decoder's first token: config.decoder_start_token_id (generation_config's first)."""
    for source in (getattr(module, "generation_config", None), module.config):
        value = getattr(source, "decoder_start_token_id", None)
        if isinstance(value, int):
            return value
    raise LoadError(f'model "{spec.name}": its config has no decoder_start_token_id, the token '
                    "the decoder starts from.",
                    fix="Set decoder_start_token_id in the model's config.")


@functools.cache
def _wrappers() -> tuple[type, type]:
    import torch

    class EncoderPart(torch.nn.Module):
        """The model's encoder, returning its last hidden state."""

        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.training = False

        def forward(self, input_ids: Any = None, attention_mask: Any = None,
                    input_features: Any = None) -> Any:
            given = {"input_ids": input_ids, "attention_mask": attention_mask,
                     "input_features": input_features}
            encoder = self.model.get_encoder()
            return encoder(**{name: value for name, value in given.items()
                              if value is not None}).last_hidden_state

    class DecoderStep(torch.nn.Module):
        """One decoding step: the self-attention past built into an EncoderDecoderCache whose
        cross-attention half starts empty (recomputed from encoder_hidden_states)."""

        def __init__(self, model: Any, layers: int):
            super().__init__()
            self.model, self.layers = model, layers
            self.training = False

        def forward(self, input_ids: Any, encoder_hidden_states: Any,
                    encoder_attention_mask: Any = None, past_key_values: Any = None) -> Any:
            from transformers.cache_utils import DynamicCache, EncoderDecoderCache

            past = [(past_key_values[str(layer)]["decoder"]["key"],
                     past_key_values[str(layer)]["decoder"]["value"])
                    for layer in range(self.layers)]
            cache = EncoderDecoderCache(DynamicCache(ddp_cache_data=past), DynamicCache())
            out = self.model(decoder_input_ids=input_ids, encoder_outputs=(encoder_hidden_states,),
                             attention_mask=encoder_attention_mask, past_key_values=cache,
                             use_cache=True)
            own = out.past_key_values.self_attention_cache
            return (out.logits, *[tensor for layer in own.layers
                                  for tensor in (layer.keys, layer.values)])

    return EncoderPart, DecoderStep


def encoder_module(module: Any) -> Any:
    return _wrappers()[0](module)


def decoder_step_module(module: Any, layers: int) -> Any:
    return _wrappers()[1](module, layers)


def encoder_spec(spec: ModelSpec, encoder: tuple[str, ...]) -> ModelSpec:
    """The encoder file's spec, `<name>.encoder`: batch dynamic, and the token axis for ids
    (Whisper's encoder takes its features at the one length its positions allow). The tool
    exports it itself: an `export-command` writes the decoder file only."""
    axes: dict[str, dict[int, str]] = {
        name: ({0: "batch"} if name == "input_features" else {0: "batch", 1: "encoder_sequence"})
        for name in encoder}
    axes[ENCODER_OUTPUT] = ({0: "batch"} if "input_features" in encoder
                            else {0: "batch", 1: "encoder_sequence"})
    return dataclasses.replace(spec, name=f"{spec.name}.encoder",
                               inputs={name: Path(name) for name in encoder}, dynamic_axes=axes,
                               outputs=(ENCODER_OUTPUT,), forward_kwargs={},
                               export_command=None)


def decoder_axes(inputs: tuple[str, ...], outputs: tuple[str, ...]) -> dict[str, dict[int, str]]:
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"},
        "encoder_hidden_states": {0: "batch", 1: "encoder_sequence"},
        "encoder_attention_mask": {0: "batch", 1: "encoder_sequence"}}
    axes.update({name: {0: "batch", 2: "past_sequence"} for name in inputs
                 if name.startswith("past_key_values.")})
    axes.update({name: {0: "batch", 2: "total_sequence"} for name in outputs
                 if name.startswith("present.")})
    return {name: axes[name] for name in (*inputs, *outputs)}


def decoder_samples(rows: int, names: tuple[str, ...], sizes: tuple[int, int, int, int],
                    dtype: np.dtype[Any], start: int) -> dict[str, np.ndarray]:
    """The exported step's samples: 2 tokens after a past of 3 positions (random keys and
    values), a random encoder output of EXPORT_ENCODER positions, its mask all ones."""
    _, heads, head_dim, width = sizes
    generator = np.random.default_rng(0)
    step = {"input_ids": np.full((rows, 2), start, dtype=np.int64),
            "encoder_hidden_states": generator.standard_normal(
                (rows, EXPORT_ENCODER, width)).astype(dtype),
            "encoder_attention_mask": np.ones((rows, EXPORT_ENCODER), dtype=np.int64)}
    for name in names:
        if name.startswith("past_key_values."):
            step[name] = generator.standard_normal((rows, heads, 3, head_dim)).astype(dtype)
    return {name: step[name] for name in names}


class EncoderDecoder:
    """A transformers encoder-decoder (its config's is_encoder_decoder) with its own cache."""

    name = "encoder-decoder"

    def matches(self, module: Any, spec: ModelSpec) -> bool:
        return (is_encoder_decoder(module) and spec.generate is not None
                and spec.generate.cache is None)

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        given = tuple(spec.inputs) if isinstance(spec.inputs, dict) else ()
        sizes = decoder_sizes(module, spec)  # layers, heads, head_dim, width
        return CacheShape(*sizes[:3], False, eos(module, decoder_config(module)), given,
                          start_token(module, spec), sizes[3], family=self.name)

    def step_module(self, module: Any, shape: CacheShape) -> Any:
        return decoder_step_module(module, shape.layers)

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        return dataclasses.replace(
            spec, inputs={name: Path(name) for name in shape.inputs}, outputs=shape.outputs,
            dynamic_axes=decoder_axes(shape.inputs, shape.outputs), forward_kwargs={})

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
        sizes = (shape.layers, shape.kv_heads, shape.head_dim, shape.width)
        rows = len(next(iter(prompts.values())))
        return decoder_samples(rows, shape.inputs, sizes, dtype, shape.start)


FAMILY: DecoderFamily = EncoderDecoder()  # mypy checks it against the Protocol
