"""forward's real arguments built from flat inputs: dotted names, caches and constant keywords.

An input name with dots binds into one argument of forward, its first part the parameter:
`added_cond_kwargs.text_embeds` becomes `forward(added_cond_kwargs={"text_embeds": t, ...})`
(more dots nest dicts), and `past_key_values.N.key` / `.value` become a transformers
`DynamicCache` holding layer N's keys and values, built as transformers builds one
(`DynamicCache(ddp_cache_data=[(keys, values), ...], config=model.config)`). The ONNX inputs
keep the flat names (optimum's layout); batches, shapes and axes work on them as on any input.
`forward-kwargs` constants are passed by keyword on every call.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping
from typing import Any

from onnx_parity.models.bound_inputs import BoundInputs
from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings import ModelSpec

Call = tuple[tuple[Any, ...], dict[str, Any]]
CACHE_MEMBER = re.compile(r"(0|[1-9][0-9]*)\.(key|value)")
CACHE_FIX = ("Name a cache's tensors past_key_values.N.key and past_key_values.N.value, one "
             "pair for each layer N = 0, 1, ... (optimum's names)")


def parameter_of(name: str) -> str:
    return name.partition(".")[0]


def check_dotted(names: list[str], model: str, config: Any = None) -> tuple[str, ...]:
    """The parameters given by dotted names (checked: well-formed, each given one way). A
    cache's layers are every layer from 0, or the attention layers of a hybrid model's
    `config` (`cache_key_layers`)."""
    malformed = [name for name in names if "." in name
                 and not all(part.strip() for part in name.split("."))]
    if malformed:
        raise LoadError(
            f'model "{model}": input name(s) {_quoted(malformed)} have an empty part between '
            "dots.",
            fix="Write a dotted input as parameter.key (e.g. added_cond_kwargs.text_embeds) or "
                "parameter.N.key (e.g. past_key_values.0.key).")
    nested = tuple(dict.fromkeys(parameter_of(name) for name in names if "." in name))
    for parameter in nested:
        whole = [name for name in names if name == parameter]
        if whole:
            raise LoadError(
                f'model "{model}": `inputs` gives "{parameter}" both whole and by dotted '
                "names.", fix=f'Give "{parameter}" one way: one tensor, or its parts by name.')
        _check_members(parameter, [name.partition(".")[2] for name in names
                                   if parameter_of(name) == parameter], model, config)
    return nested


def _check_members(parameter: str, members: list[str], model: str, config: Any) -> None:
    cache = [member for member in members if CACHE_MEMBER.fullmatch(member)]
    if cache and len(cache) != len(members):
        others = [f"{parameter}.{member}" for member in members if member not in cache]
        raise LoadError(
            f'model "{model}": "{parameter}" mixes cache inputs ({parameter}.N.key/.value) with '
            f"{_quoted(others)}.", fix=CACHE_FIX + ".")
    if cache:
        _check_layers(parameter, cache, model, cache_key_layers(config))
        return
    for member in members:
        inside = [other for other in members if other.startswith(member + ".")]
        if inside:
            raise LoadError(
                f'model "{model}": "{parameter}.{member}" is a tensor and holds '
                f'"{parameter}.{inside[0]}" too.',
                fix="Give each dotted input a name no other input's name extends.")


def _check_layers(parameter: str, members: list[str], model: str,
                  key_layers: tuple[int, ...] | None) -> None:
    layers = {int(member.partition(".")[0]) for member in members}
    every = range(max(layers) + 1) if key_layers is None else key_layers
    wanted = [f"{parameter}.{layer}.{part}" for layer in every
              for part in ("key", "value") if f"{layer}.{part}" not in members]
    if wanted:
        raise LoadError(
            f'model "{model}": the cache "{parameter}" lacks {_quoted(wanted)}.',
            fix=CACHE_FIX + ", every layer from 0 with both.")


def with_call_structure(module: Any, spec: ModelSpec, bound: BoundInputs) -> BoundInputs:
    """The bound inputs with forward's constants, checked against forward and the inputs, and
    the model's config when a cache is built for it."""
    given = {bound.parameter(name) for name in bound.names}
    clash = [name for name in spec.forward_kwargs if name in given or name in bound.names]
    if clash:
        raise LoadError(
            f'model "{spec.name}": `forward-kwargs` sets {_quoted(clash)}, which the samples '
            "give as input(s) too.", fix="Pass each argument one way: a sample or a constant.")
    signature = inspect.signature(module.forward)
    takes_any = any(p.kind == inspect.Parameter.VAR_KEYWORD
                    for p in signature.parameters.values())
    unknown = [name for name in spec.forward_kwargs if name not in signature.parameters]
    if unknown and not takes_any:
        raise LoadError(
            f'model "{spec.name}": `forward-kwargs` sets {_quoted(unknown)}, which forward does '
            f"not take (its parameters: {_quoted(list(signature.parameters))}).",
            fix="Name forward's own keyword parameters in `forward-kwargs`.")
    config = getattr(module, "config", None)
    for parameter in bound.nested:
        _check_cache(parameter, [name for name in bound.names
                                 if bound.parameter(name) == parameter], config, spec.name)
    return dataclasses.replace(bound, constants=dict(spec.forward_kwargs), model_config=config)


def _check_cache(parameter: str, names: list[str], config: Any, model: str) -> None:
    if not all(CACHE_MEMBER.fullmatch(name.partition(".")[2]) for name in names):
        return
    try:
        import transformers  # noqa: F401  (the cache is transformers' DynamicCache)
    except ImportError as error:
        raise LoadError(
            f'model "{model}": the inputs {parameter}.N.key/.value are built into a '
            f"transformers DynamicCache, and transformers cannot be imported ({error}).",
            fix="Install transformers beside the model, or give the tensors under other names."
        ) from error
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else None
    layers = getattr(text, "num_hidden_layers", None)
    holding = cache_key_layers(config)
    given = len(names) // 2
    if holding is not None and len(holding) != given:
        raise LoadError(
            f'model "{model}": the cache "{parameter}" gives {given} layer(s), and the model\'s '
            f"config has {len(holding)} attention layer(s) ({', '.join(map(str, holding))}; "
            "the others hold conv or recurrent states).",
            fix=f"{CACHE_FIX}, for every attention layer N of the model.")
    if holding is None and isinstance(layers, int) and layers != given:
        raise LoadError(
            f'model "{model}": the cache "{parameter}" gives {given} layer(s), and the model\'s '
            f"config has {layers} (num_hidden_layers).",
            fix=f"{CACHE_FIX}, for every layer of the model.")


def cache_key_layers(config: Any) -> tuple[int, ...] | None:
    """The layers whose cache holds keys and values when some layers hold only conv or
    recurrent states (a hybrid model: LFM2, Qwen3-Next, Granite-4 hybrid); None when every
    layer does, or the config does not say. Read from the cache transformers builds for it."""
    if not hasattr(config, "get_text_config"):
        return None
    import transformers  # noqa: F401  (the cache is transformers')
    from transformers import DynamicCache
    from transformers.cache_utils import CacheLayerMixin

    layers = DynamicCache(config=config).layers
    holding = tuple(index for index, layer in enumerate(layers)
                    if isinstance(layer, CacheLayerMixin))
    return holding if layers and len(holding) < len(layers) else None


def structured_call(tensors: Mapping[str, Any], bound: BoundInputs) -> Call:
    """The call with dotted inputs built into their arguments and the constants added."""
    values: dict[str, Any] = {}
    for name in bound.names:
        parameter = bound.parameter(name)
        if parameter not in bound.nested:
            values[parameter] = tensors[name]
        elif parameter not in values:
            members = {member.partition(".")[2]: tensors[member] for member in bound.names
                       if bound.parameter(member) == parameter}
            values[parameter] = build_argument(members, bound.model_config)
    keyword = {bound.parameter(name) for name in bound.keyword}
    args = tuple(value for parameter, value in values.items() if parameter not in keyword)
    kwargs = {parameter: value for parameter, value in values.items() if parameter in keyword}
    return args, {**kwargs, **bound.constants}


def build_argument(members: Mapping[str, Any], config: Any = None) -> Any:
    """A dotted parameter's value from its members (`text_embeds`, or `0.key`, `0.value` ...)."""
    if all(CACHE_MEMBER.fullmatch(member) for member in members):
        return dynamic_cache(members, config)
    nested: dict[str, Any] = {}
    for member, tensor in members.items():
        *outer, last = member.split(".")
        level = nested
        for key in outer:
            level = level.setdefault(key, {})
        level[last] = tensor
    return nested


def dynamic_cache(members: Mapping[str, Any], config: Any = None) -> Any:
    """transformers' DynamicCache holding `N.key` / `N.value` as layer N's keys and values,
    its layers of the kinds the config says, except that a sliding-window layer is a full one.
    A sliding layer keeps only its window's last positions: its present would not be the past
    plus the new tokens (the layout's total_sequence), and an export bakes whether the window
    was full (a tiny Mistral, Qwen2, Phi3 or Gemma2 went wrong once past its window). A full
    layer gives the same logits (the model's mask applies the window) and the whole past."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    full: Any = DynamicLayer
    count = 1 + max(int(member.partition(".")[0]) for member in members)
    with_config = config if hasattr(config, "get_text_config") else None
    cache = DynamicCache(config=with_config)
    cache.layers[:] = [full() if getattr(layer, "is_sliding", False) else layer
                       for layer in cache.layers]
    for layer in range(count):
        if f"{layer}.key" in members:  # a hybrid model's state layers hold no keys
            cache.update(members[f"{layer}.key"], members[f"{layer}.value"], layer)
    return cache


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)
