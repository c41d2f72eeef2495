"""The decoder families, asked in order: the first whose `matches` holds reads the cache, and
the shape it returns names it (`CacheShape.family`), so the step's module, spec and samples
come from the same family. A new family is a module over base.py and a line in FAMILIES, before
the families it narrows (dense takes every decoder the others leave, so it comes last).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_parity.models.generating import (
    dense,
    encoder_decoder,
    flat_cache,
    gated_delta,
    lfm2,
    mamba2,
    mamba_hybrid,
    whole_prefix,
)
from onnx_parity.models.generating.base import CacheShape, DecoderFamily
from onnx_parity.settings import ModelSpec

FAMILIES: tuple[DecoderFamily, ...] = (
    encoder_decoder.FAMILY, flat_cache.FAMILY, lfm2.FAMILY, gated_delta.FAMILY,
    mamba_hybrid.FAMILY, mamba2.FAMILY, whole_prefix.FAMILY, dense.FAMILY)


def decoder_family(module: Any, spec: ModelSpec) -> DecoderFamily:
    """The family that exports a generating model's decoder step."""
    return next(family for family in FAMILIES if family.matches(module, spec))


def _family(shape: CacheShape) -> DecoderFamily:
    return next(family for family in FAMILIES if family.name == shape.family)


def cache_shape(module: Any, spec: ModelSpec) -> CacheShape:
    """The cache of a generating model, read by its family: from `cache-shape`, else from its
    config."""
    assert spec.generate is not None
    return decoder_family(module, spec).cache_shape(module, spec)


def decoder_module(module: Any, spec: ModelSpec, shape: CacheShape) -> Any:
    """The module the step is exported from and run in PyTorch (a flat-cache decoder wrapped,
    an encoder-decoder's decoder step)."""
    assert spec.generate is not None
    return _family(shape).step_module(module, shape)


def step_spec(spec: ModelSpec, shape: CacheShape) -> ModelSpec:
    """The spec of one decoding step: every axis declared, the cache on."""
    return _family(shape).step_spec(spec, shape)


def step_samples(prompts: dict[str, np.ndarray], shape: CacheShape,
                 dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
    """The exported step's samples, one per prompt, after a past of EXPORT_PAST positions."""
    return _family(shape).step_samples(prompts, shape, dtype)
