"""The position thresholds of a generating model: lengths past which it computes differently.

Read from the model's config as transformers 5.23's code compares a length with them:

- rope (`modeling_rope_utils.dynamic_rope_update`): `longrope` switches from `short_factor`
  to `long_factor` once `max(position_ids) + 1 > original_max_position_embeddings`;
  `dynamic` (NTK) recomputes its frequencies once that length passes the
  `max_position_embeddings` it was built for (`_compute_dynamic_ntk_parameters` takes
  `max(seq_len, max_position_embeddings)`). `yarn`, `llama3`, `linear` and `proportional`
  compute their frequencies once from the config, whatever the length: no threshold.
  `llama_4_scaling_beta` (Ministral3, Mistral4) scales the queries by
  `1 + beta * log(1 + floor(position / original_max_position_embeddings))`: a step there.
- masks (`masking_utils`): a sliding layer attends to `kv_idx > q_idx - sliding_window`, so
  past `sliding_window` positions the first ones leave the window (the layers whose
  `layer_types` entry is `sliding_attention`, or every layer without `layer_types`); a chunked
  layer (`attention_chunk_size`, `chunked_attention`) starts a new chunk past each multiple.

A threshold is a total length T (positions, prompt and generated): the model computes
differently at T + 1 than at T. The context is `max-context` in `generate`, else the config's
`max_position_embeddings`; thresholds at or past it are recorded, not crossed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SLIDING = "sliding_attention"
CHUNKED = "chunked_attention"


@dataclass(frozen=True)
class Threshold:
    """A config key whose value is a length the model's code compares with."""

    key: str  # the config key: original_max_position_embeddings, sliding_window ...
    value: int  # T: the model computes differently at T + 1 positions than at T
    why: str  # what switches, in transformers' terms
    layers: tuple[int, ...] = ()  # the layers it applies to; () = every layer


@dataclass(frozen=True)
class PositionLimits:
    """The thresholds found and the context they are judged against."""

    thresholds: tuple[Threshold, ...]
    context: int | None  # positions; None: neither max-context nor max_position_embeddings
    context_key: str  # "max-context" or "max_position_embeddings"

    def crossed(self, threshold: Threshold) -> bool:
        """Whether decoding steps run across it: a step at T + 1 positions fits the context."""
        return self.context is None or threshold.value + 1 <= self.context


def position_limits(module: Any, max_context: int | None) -> PositionLimits:
    """The thresholds of a module's (text) config, with the context they are judged against."""
    config = text_config(module)
    found = thresholds(config) if config is not None else ()
    if max_context is not None:
        return PositionLimits(found, max_context, "max-context")
    context = getattr(config, "max_position_embeddings", None)
    return PositionLimits(found, context if isinstance(context, int) else None,
                          "max_position_embeddings")


def text_config(module: Any) -> Any:
    config = getattr(module, "config", None)
    if config is None or not hasattr(config, "get_text_config"):
        return None
    return config.get_text_config(decoder=True)


def thresholds(config: Any) -> tuple[Threshold, ...]:
    """Every threshold of a config, each key once (the lowest value), in order of value."""
    found = [*_rope(config), *_masks(config)]
    unique: dict[tuple[str, int], Threshold] = {}
    for item in found:
        unique.setdefault((item.key, item.value), item)
    return tuple(sorted(unique.values(), key=lambda item: (item.value, item.key)))


def _rope(config: Any) -> list[Threshold]:
    parameters = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling",
                                                                      None)
    if not isinstance(parameters, dict):
        return []
    # Per layer type (Gemma3's `sliding_attention` / `full_attention`) or one for all layers.
    per_type = all(isinstance(value, dict) for value in parameters.values()) and parameters
    tables = list(parameters.values()) if per_type else [parameters]
    return [item for table in tables for item in _rope_table(config, table)]


def _rope_table(config: Any, table: dict[str, Any]) -> list[Threshold]:
    kind = str(table.get("rope_type", table.get("type", "default")))
    original = table.get("original_max_position_embeddings",
                         getattr(config, "original_max_position_embeddings", None))
    if table.get("llama_4_scaling_beta"):  # Ministral3, Mistral4: a step at each multiple
        return _one("original_max_position_embeddings", original, "llama_4_scaling_beta: "
                    "the query scale 1 + beta * log(1 + floor(position / it)) steps up")
    if kind == "longrope":
        return _one("original_max_position_embeddings", original,
                    "rope_type longrope: long_factor instead of short_factor past it")
    if "dynamic" in kind:  # dynamic_rope_update's own test
        return _one("max_position_embeddings", getattr(config, "max_position_embeddings", None),
                    "rope_type dynamic: NTK frequencies recomputed past it")
    return []


def _masks(config: Any) -> list[Threshold]:
    types = getattr(config, "layer_types", None)
    found: list[Threshold] = []
    for key, kind, why in (("sliding_window", SLIDING, "the first positions leave the window"),
                           ("attention_chunk_size", CHUNKED, "a new attention chunk starts")):
        value = getattr(config, key, None)
        if types is None:
            found += _one(key, value, why)
            continue
        layers = tuple(index for index, name in enumerate(types) if name == kind)
        if layers:
            found += _one(key, value, why, layers)
    return found


def _one(key: str, value: object, why: str, layers: tuple[int, ...] = ()) -> list[Threshold]:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return []
    return [Threshold(key, value, why, layers)]
