"""What a transformers decoder's own cache holds after a prompt pass: the past its exported step
takes and the loop starts empty, tensor by tensor, or why it cannot be a file's past.

Config arithmetic (`num_key_value_heads x head_dim`) is not the cache's shape: DeepSeek-V2/V3
and MiniCPM3 cache the MLA latent, one head of `kv_lora_rank` as keys and `qk_rope_head_dim` as
values; Falcon's multi-query attention one head, its new decoder architecture every query head;
GPTBigCode one fused head. So the decoder runs one prompt pass of PROBE_TOKENS tokens and each
layer's `keys` and `values` say their heads (axis 1) and width (axis 3). The run changes
nothing the model settles (`one_run(eager=False)`, as a trace). A flat-cache decoder takes its
cache as inputs, so it has nothing to run before it is given one: `cache-shape` says it.

A cache the file cannot carry as keys and values makes the decoder a whole-prefix one
(whole_prefix.py: each step re-runs the prefix, on both sides, as transformers' `generate` runs
a model without a cache), with the reason in the report: forward returns no cache (a BERT-like
decoder built without `is_decoder`), or not a cache of layers (an `EncoderDecoderCache` where
the config adds cross-attention), a layer holds a convolution or recurrent state no family here
exports (Bamba's, Ling's LinearAttentionLayer), or the cache class keeps such a state beside
its layers (MiniMax's `linear_cache`), or one step with the cache rebuilt from its keys and
values (as the exported step rebuilds it, call_arguments.dynamic_cache) fails or gives other
logits than the model's own cache: its cache class holds more than keys and values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onnx_parity.models.call_arguments import dynamic_cache
from onnx_parity.models.generating.base import PastTensor
from onnx_parity.models.module_state import one_run
from onnx_parity.models.reference import ReferenceFailure

PROBE_TOKENS = 2  # a prompt of two tokens: no window of a sliding layer is narrower
REBUILT_ATOL = 1e-4  # the rebuilt cache's step against the own cache's: float noise is ~1e-7


@dataclass(frozen=True)
class Layout:
    """Each layer's keys then values as the model's own cache holds them, or (`whole_prefix`)
    why the cache cannot be a file's past, said as the report says it."""

    tensors: tuple[PastTensor, ...] = ()
    whole_prefix: str = ""


def read_layout(module: Any, constants: Mapping[str, object]) -> Layout:
    """The cache after a prompt pass (forward given `constants`, the model's forward-kwargs).
    PyTorch failing on the prompt pass is the model's (ReferenceFailure)."""
    cache = getattr(_forward(module, constants), "past_key_values", None)
    if cache is None:
        return Layout(whole_prefix="forward returns no cache after a prompt pass")
    layers = getattr(cache, "layers", None)
    if not layers:
        return Layout(whole_prefix=f"its cache is a {type(cache).__name__}, not layers of keys "
                                   "and values")
    for index, layer in enumerate(layers):
        if not all(getattr(getattr(layer, part, None), "ndim", None) == 4
                   for part in ("keys", "values")):
            return Layout(whole_prefix=_state_reason(cache, index, layer))
    tensors = tuple(PastTensor(int(tensor.shape[1]), int(tensor.shape[3]))
                    for layer in layers for tensor in (layer.keys, layer.values))
    return Layout(tensors, _rebuilt_step(module, constants, cache))


def _forward(module: Any, constants: Mapping[str, object], past: Any = None) -> Any:
    """forward's output on a prompt of PROBE_TOKENS tokens, or with `past` on PROBE_TOKENS more
    (not one: a cache missing a state of the new tokens' length, DeepSeek-V3.2's indexer keys,
    broadcasts against the mask when that length is 1). PyTorch failing on it is the model's
    (ReferenceFailure)."""
    import torch

    ids = torch.full((1, PROBE_TOKENS), 0 if past is None else 1)  # ids 0, 1: in every vocabulary
    total = PROBE_TOKENS * (1 if past is None else 2)
    extra = {} if past is None else {"past_key_values": past}
    what = (f"a prompt pass of {PROBE_TOKENS} tokens" if past is None
            else f"a step of {PROBE_TOKENS} tokens after {PROBE_TOKENS}")
    try:
        with torch.no_grad(), one_run(module, eager=False):
            return module(input_ids=ids, attention_mask=torch.ones((1, total), dtype=torch.int64),
                          **{**constants, **extra, "use_cache": True})
    except Exception as error:  # whatever forward raises is the model's failure
        raise ReferenceFailure(
            f"{type(error).__name__}: {error} ({what}, run to read what its cache holds)",
            error) from error


def _rebuilt_step(module: Any, constants: Mapping[str, object], cache: Any) -> str:
    """'' when one step with the cache rebuilt from its keys and values gives the logits the
    model's own cache gives; else what happened, as the report says it (a step with its own
    cache that computes no token, CPM-Ant's, included)."""
    members = {f"{index}.{part}": getattr(layer, f"{part}s").clone()
               for index, layer in enumerate(cache.layers) for part in ("key", "value")}
    more = _more_than_keys(cache)
    try:
        rebuilt = _forward(module, constants, dynamic_cache(
            members, getattr(module, "config", None)))
    except ReferenceFailure as failure:  # ProphetNet: a cached step takes one token only
        head = more or f"its {type(cache).__name__}'s keys and values"
        return f"{head}: a step with them rebuilt as a DynamicCache fails ({failure})"
    own, again = _logits(_forward(module, constants, cache)), _logits(rebuilt)
    if not own.numel():  # CPM-Ant: its cached step returns no position
        return (f"a step of {PROBE_TOKENS} tokens with its own {type(cache).__name__} gives "
                f"logits of shape {list(own.shape)}: its cached loop computes no token")
    difference = (float((again - own).abs().max()) if own.shape == again.shape
                  else float("inf"))
    if not difference <= REBUILT_ATOL:  # NaN included
        head = more or f"its {type(cache).__name__} holds more than keys and values"
        return (f"{head}: a step with them rebuilt as a DynamicCache gives logits "
                f"{difference:.2g} from its own cache's")
    return ""


def _more_than_keys(cache: Any) -> str:
    """What the cache holds beside keys and values as far as its layers name it, or ''."""
    layer = cache.layers[0]
    extra = ", ".join(name for name in _tensor_members(layer).split(", ")
                      if name and name not in ("keys", "values"))
    return (f"its {type(cache).__name__}'s layers ({type(layer).__name__}) hold {extra} beside "
            "keys and values" if extra else "")


def _logits(out: Any) -> Any:
    return out.logits if hasattr(out, "logits") else out[0]


def _state_reason(cache: Any, index: int, layer: Any) -> str:
    """Why layer `index` is no keys and values: the state it holds, or (MiniMax) the state its
    cache class keeps beside the layers when the layer holds none."""
    held = _tensor_members(layer)
    if held:
        return (f"layer {index} of its cache is a {type(layer).__name__} holding {held} (a "
                "convolution or recurrent state no decoder family here carries)")
    beside = _tensor_members(cache, skip="layers")
    return (f"layer {index} of its {type(cache).__name__} holds no keys or values: the cache "
            f"keeps {beside or 'its state'} beside its layers (a recurrent state no decoder "
            "family here carries)")


def _tensor_members(owner: Any, skip: str = "") -> str:
    """The names of `owner`'s attributes holding a tensor, or a dict or list of them
    (transformers' LinearAttentionLayer keeps its states in a dict, MiniMaxCache in a list)."""
    def holds(item: object) -> bool:
        values = (item.values() if isinstance(item, dict)
                  else item if isinstance(item, (list, tuple)) else [item])
        return any(hasattr(value, "shape") for value in values)

    return ", ".join(name for name, item in vars(owner).items() if name != skip and holds(item))
