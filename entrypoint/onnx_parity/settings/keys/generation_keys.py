"""The key of a generating model: `generate = { steps = 16 }`.

Under `generate` the tool declares the exported axes itself (optimum's decoder-with-past
layout), so `dynamic-axes`, `outputs` and `axis-sizes` beside it are errors, and the committed
samples are the prompts: `input_ids` and `attention_mask` (with a vision-language model's image
inputs, which its family in models/ checks), or a speech encoder-decoder's `input_features`.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnx_parity.settings.declaration import Declaration
from onnx_parity.settings.keys.deployment_keys import bundle_value, runtime_value
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    dotted,
    integer,
    show_value,
    shown,
    wrong_type,
)

CACHES = ("flat",)
PROMPT_INPUTS = ("input_ids", "attention_mask")
FEATURE_INPUTS = ("input_features",)  # a speech encoder-decoder's (Whisper's) encoder input
# What a vision-language model's processor adds to the prompts (its family says which it takes).
IMAGE_INPUTS = ("pixel_values", "image_grid_thw", "mm_token_type_ids", "pixel_attention_mask",
                "image_sizes", "token_type_ids")
MAX_STEPS = 4096
MAX_CONTEXT = 1 << 24  # positions: above any model's context (16M)
_FIX = "a table, e.g. generate = { steps = 16 }"
_FIELDS = ("steps", "stop-at-eos", "cache", "cache-shape", "max-context", "bundle", "runtime")
_EXCLUSIVE = ("dynamic-axes", "outputs", "axis-sizes")


@dataclass(frozen=True)
class Generation:
    """How a generating model is checked: greedy decoding for `steps` tokens after the prompt."""

    steps: int
    stop_at_eos: bool = False
    # "flat": the user's own decoder, forward(input_ids, attention_mask, [position_ids,] *past)
    # returning (logits, *present); None: a transformers model with its own cache object.
    cache: str | None = None
    cache_shape: tuple[int, int, int] | None = None  # layers, kv_heads, head_dim
    # The deployed context in positions (prompt + generated): the position thresholds below it
    # are crossed (models/generating/thresholds.py). None: the config's max_position_embeddings.
    max_context: int | None = None
    # The runtimes a bundle folder is written for, and the runtime whose own loop generates the
    # prompts again (settings/keys/deployment_keys.py).
    bundle: tuple[str, ...] = ()
    runtime: str | None = None


def generate_value(value: object, context: KeyContext) -> Generation:
    where = context.where
    if not isinstance(value, dict):
        raise wrong_type(where, value, _FIX)
    unknown = [name for name in value if name not in _FIELDS]
    if unknown:
        raise ConfigError(f'{context.place.at(dotted(context.key, unknown[0]))}: not a key of '
                          f"`generate`; its keys are {', '.join(_FIELDS)}.")
    _check_neighbours(context)
    if "steps" not in value:
        raise ConfigError(f"{where}: `steps` is missing. Say how many tokens to generate after "
                          "the prompt, e.g. generate = { steps = 16 }.")
    cache = _cache(value, context)
    return Generation(steps=_steps(value["steps"], context.place.at(dotted(context.key, "steps"))),
                      stop_at_eos=_flag(value, context), cache=cache,
                      cache_shape=_cache_shape(value, context, cache),
                      max_context=_max_context(value, context),
                      bundle=bundle_value(value, context, cache),
                      runtime=runtime_value(value, context, cache))


def _check_neighbours(context: KeyContext) -> None:
    """The keys the tool sets itself for a generating model, and the prompts' names."""
    beside = [name for name in _EXCLUSIVE if name in context.read]
    if beside:
        raise ConfigError(
            f"{context.where}: this [[model]] sets {', '.join(f'`{name}`' for name in beside)} "
            "too, which `generate` decides itself: it exports the decoder-with-past layout "
            "(every axis dynamic, outputs logits and present.N.key/.value). Remove "
            f"{'it' if len(beside) == 1 else 'them'} from this [[model]].")
    inputs = context.read.get("inputs")
    names = sorted(inputs) if isinstance(inputs, dict) else None
    if not _prompt_names(names):
        given = ", ".join(f'"{shown(name)}"' for name in names) if names else "one bundle"
        raise ConfigError(
            f"{context.where}: a generating model's `inputs` are its prompts, input_ids and "
            f"attention_mask (a left-padded batch is the normal case; an encoder-decoder's "
            f"encoder inputs) with a vision-language model's image inputs "
            f"({', '.join(IMAGE_INPUTS)}), or a speech encoder-decoder's input_features; this "
            f'[[model]] gives {given}. Write inputs = {{ input_ids = "samples/ids.npy", '
            'attention_mask = "samples/mask.npy" }, or inputs = { input_features = '
            '"samples/features.npy" }.')


def _prompt_names(names: list[str] | None) -> bool:
    """The prompts (with a VLM's image inputs), or a speech encoder-decoder's features."""
    if names is None:
        return False
    if names == sorted(FEATURE_INPUTS):
        return True
    return set(PROMPT_INPUTS) <= set(names) <= {*PROMPT_INPUTS, *IMAGE_INPUTS}


def _steps(value: object, where: str) -> int:
    steps = integer(value, where, "a whole number of tokens, e.g. steps = 16")
    if not 1 <= steps <= MAX_STEPS:
        raise ConfigError(f"{where}: {steps} is not between 1 and {MAX_STEPS}. Use the number "
                          "of tokens to generate after the prompt, e.g. steps = 16.")
    return steps


def _flag(value: dict[str, object], context: KeyContext) -> bool:
    flag = value.get("stop-at-eos", False)
    if not isinstance(flag, bool):
        raise wrong_type(context.place.at(dotted(context.key, "stop-at-eos")), flag,
                         "true or false")
    return flag


def _cache(value: dict[str, object], context: KeyContext) -> str | None:
    cache = value.get("cache")
    if cache is not None and cache not in CACHES:
        raise ConfigError(
            f"{context.place.at(dotted(context.key, 'cache'))}: {show_value(cache)} is not a "
            'cache kind. Write cache = "flat" for your own decoder (forward(input_ids, '
            "attention_mask, position_ids, *past) returning (logits, *present)), or leave it "
            "out for a transformers model.")
    return None if cache is None else str(cache)


def _cache_shape(value: dict[str, object], context: KeyContext,
                 cache: str | None) -> tuple[int, int, int] | None:
    if "cache-shape" not in value:
        return None
    where = context.place.at(dotted(context.key, "cache-shape"))
    if cache is None:
        raise ConfigError(f'{where}: applies only with cache = "flat" (a transformers model\'s '
                          'cache follows its config). Add cache = "flat" or remove it.')
    raw = value["cache-shape"]
    fix = "[layers, kv_heads, head_dim], three whole numbers >= 1, e.g. cache-shape = [2, 2, 8]"
    if not isinstance(raw, list) or len(raw) != 3:
        raise wrong_type(where, raw, fix)
    sizes = tuple(integer(item, where, fix) for item in raw)
    if min(sizes) < 1:
        raise ConfigError(f"{where}: {show_value(raw)} holds a size below 1. Write {fix}.")
    return sizes[0], sizes[1], sizes[2]


def _max_context(value: dict[str, object], context: KeyContext) -> int | None:
    if "max-context" not in value:
        return None
    where = context.place.at(dotted(context.key, "max-context"))
    fix = "a whole number of positions (prompt and generated tokens), e.g. max-context = 4096"
    size = integer(value["max-context"], where, fix)
    if not 2 <= size <= MAX_CONTEXT:
        raise ConfigError(f"{where}: {size} is not between 2 and {MAX_CONTEXT}. Write {fix}: "
                          "the longest sequence you deploy the model at.")
    return size


# The key's declaration, in settings/schema.py's ModelSpec: `setting("generate", None, ...)`.
GENERATE_KEY: Declaration = {
    "kind": "table { steps, stop-at-eos, cache, cache-shape, max-context, bundle, runtime }",
        "check": generate_value,
        "shown": "none (one forward pass is checked)", "model_only": True,
        "example": "generate = { steps = 16 }",
        "doc": "Checks a causal language model the way it generates: one decoder-with-past ONNX "
            "file in optimum's layout is exported, then the prompts (`inputs` = `input_ids` and "
            "`attention_mask`) are decoded greedily for `steps` tokens in PyTorch and in "
            "onnxruntime, each feeding its own cache back; logits are compared at every step "
            "and the tokens must agree (`generation-mismatch`). `stop-at-eos = true` stops a row "
            'at the end-of-sequence token; `cache = "flat"` is for your own decoder, '
            "`forward(input_ids, attention_mask, [position_ids,] *past)` returning `(logits, "
            "*present)`, with `cache-shape = [layers, kv_heads, head_dim]` when it has no "
            "`config`. The position thresholds the model's config names (LongRoPE's "
            "`original_max_position_embeddings`, dynamic NTK's `max_position_embeddings`, "
            "`sliding_window`, `attention_chunk_size`) below its context (`max-context`, "
            "default its `max_position_embeddings`) are crossed by decoding steps from a "
            "built past (`position-threshold`). `dynamic-axes`, `outputs` and `axis-sizes` "
            "do not apply; `variants` are decoded too, their token agreement their top-1 "
            "agreement. An encoder-decoder "
            "generator (BART, T5, Whisper, Marian) exports `<name>.encoder.onnx` and the decoder "
            "`<name>.onnx`, its `inputs` the encoder's (`input_ids` and `attention_mask`, or "
            "`input_features`), decoded from the model's decoder start token. `bundle = "
            '["onnxruntime-genai", "optimum"]` writes beside the decoder the folder each runtime '
            "loads unchanged (`<name>.genai/`, `<name>.optimum/`); `runtime = "
            '"onnxruntime-genai"` generates the prompts again with that runtime\'s own loop from '
            "its bundle, token by token against PyTorch (both need `pip install "
            "'onnx-parity[genai]'`). A vision-language model (a config with `vision_config` "
            "and an image token, e.g. Qwen2-VL) takes its processor's image inputs beside the "
            "prompts and exports `<name>.vision.onnx` (one image per call), "
            "`<name>.embedding.onnx` and the decoder fed `inputs_embeds`, each checked. See "
            "docs/generation.md."}
