"""A decoder whose forward takes no cache the tool can feed back (GPT-1's none; XLNet's `mems`,
XLM's `cache` dict, Reformer's `past_buckets_states`: none of them keys and values in a
layout a file could take and return), under `generate`.

Its exported file takes the whole prefix, `input_ids` and `attention_mask` (batch, sequence),
and returns `logits` (batch, sequence, vocab). No `position_ids`: forward counts its own, as
these models' `prepare_inputs_for_generation` passes none (Reformer's pads given ones wrongly).
Each step runs the whole prefix again on both sides (verification/generation/
prefix_decoding.py), as transformers' `generate` runs a model with no cache and as a runtime
running this file must. forward's cache switches (`use_cache`, `use_mems`) are off on both
sides, so neither computes a cache nobody reads.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import (
    WHOLE_PREFIX,
    CacheShape,
    DecoderFamily,
    whole_prefix_shape,
)
from onnx_parity.models.generating.dense import check_prompts
from onnx_parity.settings import ModelSpec

# forward's parameters of a cache some other family feeds back (state_cache.py's recurrent
# models name theirs `cache_params`; RWKV's is `state`): such a model is not this family's.
CACHES = ("past_key_values", "cache_params", "state")
SWITCHES = ("use_cache", "use_mems")  # forward's cache switches, turned off on both sides


def takes(module: Any) -> set[str]:
    return set(inspect.signature(module.forward).parameters)


def prefix_logits(module: Any, input_ids: Any, attention_mask: Any) -> Any:
    """The model's logits over the whole prefix, its cache switches off: the call the exported
    file is traced from and the one PyTorch's side runs at every step."""
    given = takes(module)
    kwargs = {name: False for name in SWITCHES if name in given}
    if "attention_mask" in given:
        kwargs["attention_mask"] = attention_mask
    out = module(input_ids=input_ids, **kwargs)
    return out.logits if hasattr(out, "logits") else out[0]


@functools.cache
def _wrapper_class() -> type:
    import torch

    class WholePrefixDecoder(torch.nn.Module):
        """The model over the whole prefix, returning its logits only (XLNet would return
        `mems`, Reformer its buckets, outputs the file has no use for)."""

        def __init__(self, decoder: Any):
            super().__init__()
            self.decoder = decoder
            self.training = False

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return prefix_logits(self.decoder, input_ids, attention_mask)

    return WholePrefixDecoder


class WholePrefix:
    """A causal LM with no cache to feed back: every step re-runs the whole prefix."""

    name = WHOLE_PREFIX

    def matches(self, module: Any, spec: ModelSpec) -> bool:
        return (spec.generate is not None and spec.generate.cache is None
                and hasattr(module, "forward") and not takes(module) & set(CACHES))

    def cache_shape(self, module: Any, spec: ModelSpec) -> CacheShape:
        check_prompts(spec.name, tuple(spec.inputs) if isinstance(spec.inputs, dict) else ())
        return whole_prefix_shape(module, "forward takes no cache")

    def step_module(self, module: Any, shape: CacheShape) -> Any:  # noqa: ARG002
        return _wrapper_class()(module)

    def step_spec(self, spec: ModelSpec, shape: CacheShape) -> ModelSpec:
        axes = {name: {0: "batch", 1: "sequence"} for name in (*shape.inputs, "logits")}
        return dataclasses.replace(
            spec, inputs={name: Path(name) for name in shape.inputs}, dynamic_axes=axes,
            outputs=shape.outputs)

    def step_samples(self, prompts: dict[str, np.ndarray], shape: CacheShape,  # noqa: ARG002
                     dtype: np.dtype[Any]) -> dict[str, np.ndarray]:  # noqa: ARG002
        """The prompts themselves: the prompt pass is a whole prefix like every step."""
        ids = np.asarray(prompts["input_ids"]).astype(np.int64)
        mask = np.asarray(prompts["attention_mask"]).astype(np.int64)
        return {"input_ids": ids, "attention_mask": mask}


FAMILY: DecoderFamily = WholePrefix()  # mypy checks it against the Protocol
