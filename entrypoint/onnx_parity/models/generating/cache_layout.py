"""What a transformers decoder's own cache holds after a prompt pass: the past its exported step
takes and the loop starts empty, tensor by tensor.

Config arithmetic (`num_key_value_heads x head_dim`) is not the cache's shape: DeepSeek-V2/V3
and MiniCPM3 cache the MLA latent, one head of `kv_lora_rank` as keys and `qk_rope_head_dim` as
values; Falcon's multi-query attention one head, its new decoder architecture every query head;
GPTBigCode one fused head. So the decoder runs one prompt pass of PROBE_TOKENS tokens and each
layer's `keys` and `values` say their heads (axis 1) and width (axis 3). The run changes
nothing the model settles (`one_run(eager=False)`, as a trace). A flat-cache decoder takes its
cache as inputs, so it has nothing to run before it is given one: `cache-shape` says it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onnx_parity.models.generating.base import PastTensor
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.module_state import one_run
from onnx_parity.models.reference import ReferenceFailure

PROBE_TOKENS = 2  # a prompt of two tokens: no window of a sliding layer is narrower


def cache_tensors(module: Any, model: str,
                  constants: Mapping[str, object]) -> tuple[PastTensor, ...]:
    """Each layer's keys then values, as the model's own cache holds them after a prompt pass
    (forward given `constants`, the model's forward-kwargs). PyTorch failing on it is the
    model's (ReferenceFailure); a cache of other tensors than keys and values is a LoadError
    naming its layer."""
    cache = _prompt_pass(module, constants)
    layers = getattr(cache, "layers", None)
    if not layers:
        raise LoadError(
            f'model "{model}": after a prompt pass its cache is a {type(cache).__name__}, '
            "not a cache of layers of keys and values (a DynamicCache), which `generate` "
            "exports.", fix="Give `generate` a decoder whose forward returns a DynamicCache as "
                            "past_key_values, or a flat-cache decoder with cache-shape.")
    return tuple(_tensor(model, index, layer, part) for index, layer in enumerate(layers)
                 for part in ("keys", "values"))


def _prompt_pass(module: Any, constants: Mapping[str, object]) -> Any:
    import torch

    ids = torch.zeros((1, PROBE_TOKENS), dtype=torch.int64)  # id 0: in every vocabulary
    try:
        with torch.no_grad(), one_run(module, eager=False):
            out = module(input_ids=ids, attention_mask=torch.ones_like(ids),
                         **{**constants, "use_cache": True})
    except Exception as error:  # whatever forward raises is the model's failure
        raise ReferenceFailure(
            f"{type(error).__name__}: {error} (a prompt pass of {PROBE_TOKENS} tokens, run to "
            "read what its cache holds)", error) from error
    return getattr(out, "past_key_values", None)


def _tensor(model: str, index: int, layer: Any, part: str) -> PastTensor:
    value: Any = getattr(layer, part, None)
    if getattr(value, "ndim", None) != 4:
        held = ", ".join(name for name, item in vars(layer).items() if _holds_tensors(item))
        raise LoadError(
            f'model "{model}": layer {index} of its cache is a {type(layer).__name__} whose '
            f"`{part}` is not a (batch, heads, positions, width) tensor after a prompt pass "
            f"(it holds {held or 'no tensor'}: a convolution or recurrent state): `generate` "
            "exports caches of keys and values only.",
            fix="Run `generate` on a decoder whose cache holds keys and values in every layer.")
    return PastTensor(int(value.shape[1]), int(value.shape[3]))


def _holds_tensors(item: object) -> bool:
    """A tensor, or a dict of them (transformers' LinearAttentionLayer keeps its states so)."""
    values = item.values() if isinstance(item, dict) else [item]
    return any(hasattr(value, "shape") for value in values)
