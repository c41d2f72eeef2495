"""Whatever forward returns, flattened in one place: its leaves in order, each with a name.

Tensors and Python numbers are the leaves; None and objects of no known structure are dropped.
A tuple or list is walked in order and names each value by its place (`0`, `1.0`); a mapping
(a dict, transformers' `ModelOutput`, diffusers' `BaseOutput`) by its keys in their order; a
namedtuple or dataclass by its fields; a transformers `Cache` as each layer's keys and values,
named as optimum and onnxruntime-genai name the outputs of a decoder (`present.0.key`,
`present.0.value`, ...; `present.0.decoder.key` and `present.0.encoder.key` for an
encoder-decoder cache), wherever it sits. Any other type torch's pytree knows is walked by its
flatten function, its children named by place.

This walk never asks torch's pytree for key paths: diffusers registers `BaseOutput` without a
`flatten_with_keys_fn`, and `tree_flatten_with_path` raises on it. For every structure both
exporters flatten themselves (tuples, lists, dicts) the order is pytree's; a model whose output
is named (`Flattened.named`) is exported through models/flat_call.py, which returns exactly
these leaves in this order, so the ONNX outputs line up with them whatever the exporter does.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]
CACHE_NAME = "present"  # optimum's name of a decoder's returned keys and values


@dataclass(frozen=True)
class Flattened:
    """The leaves of one returned structure, in order, with the path of each."""

    paths: tuple[Path, ...]
    leaves: tuple[Any, ...]
    # True when the structure holds a named container (anything but tensors, numbers, tuples
    # and lists): its leaves then get their names as the ONNX output names.
    named: bool

    def names(self) -> tuple[str | None, ...]:
        """Each leaf's dotted name; None for a lone tensor (forward returned one value)."""
        return tuple(".".join(path) or None for path in self.paths)


def flatten(result: Any) -> Flattened:
    named = [False]
    pairs = list(_walk(result, (), named))
    return Flattened(tuple(path for path, _ in pairs), tuple(leaf for _, leaf in pairs),
                     named[0])


def is_leaf(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor | bool | int | float)


def _walk(value: Any, path: Path, named: list[bool]) -> Iterator[tuple[Path, Any]]:
    if value is None:
        return
    if is_leaf(value):
        yield path, value
        return
    children = _children(value)
    if children is None:
        return  # an object of no known structure: not an output either exporter can give
    container, items = children
    if container != "sequence":
        named[0] = True
    if container == "cache":
        path = ()  # a cache's names are the same wherever it sits in the output
    for key, child in items:
        yield from _walk(child, (*path, key), named)


def _children(value: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    """What kind of container the value is, and its children by name; None: not one."""
    if _is_cache(value):
        return "cache", cache_items(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return "fields", [(str(field), getattr(value, field)) for field in value._fields]
    if isinstance(value, tuple | list):
        return "sequence", [(str(index), child) for index, child in enumerate(value)]
    if isinstance(value, Mapping):  # dict, ModelOutput, BaseOutput (an OrderedDict too)
        return "mapping", [(str(key), child) for key, child in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "fields", [(field.name, getattr(value, field.name))
                          for field in dataclasses.fields(value)]
    return _pytree_children(value)


def _pytree_children(value: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    from torch.utils import _pytree

    node = _pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    children, _ = node.flatten_fn(value)
    return "registered", [(str(index), child) for index, child in enumerate(children)]


def _is_cache(value: Any) -> bool:
    """A transformers `Cache` (transformers is only looked at when the model imported it)."""
    cache_utils = sys.modules.get("transformers.cache_utils")
    cache = getattr(cache_utils, "Cache", None)
    return isinstance(cache, type) and isinstance(value, cache)


def cache_items(cache: Any) -> list[tuple[str, Any]]:
    """A cache's tensors as `present`'s children: `N.key`, `N.value` per layer, in layer order;
    an encoder-decoder cache's two caches as `N.decoder.*` and `N.encoder.*`."""
    if hasattr(cache, "self_attention_cache") and hasattr(cache, "cross_attention_cache"):
        decoder = _layers(cache.self_attention_cache)
        encoder = _layers(cache.cross_attention_cache)
        return [(CACHE_NAME, {str(index): {"decoder": _pair(decoder, index),
                                           "encoder": _pair(encoder, index)}
                              for index in range(max(len(decoder), len(encoder)))})]
    layers = _layers(cache)
    return [(CACHE_NAME, {str(index): _pair(layers, index) for index in range(len(layers))})]


def _layers(cache: Any) -> list[tuple[Any, Any]]:
    """(keys, values) of each layer: transformers 5's `layers`, else the older lists."""
    if hasattr(cache, "layers"):
        return [(getattr(layer, "keys", None), getattr(layer, "values", None))
                for layer in cache.layers]
    keys, values = getattr(cache, "key_cache", []), getattr(cache, "value_cache", [])
    return list(zip(keys, values, strict=False))


def _pair(layers: list[tuple[Any, Any]], index: int) -> dict[str, Any]:
    keys, values = layers[index] if index < len(layers) else (None, None)
    return {"key": keys, "value": values}
