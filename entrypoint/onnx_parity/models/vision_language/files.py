"""The three files of a vision-language pipeline as specs and samples export/ exports as any
call (base.py says what each takes).

`<name>.vision` takes one image (no batch axis: each sample is one image, the first one
exported), every axis that varies with the image dynamic; `<name>.embedding` takes `input_ids`
(batch, sequence) and `image_features` (image_tokens, hidden); the decoder `<name>` takes
`inputs_embeds` (batch, sequence, hidden), `attention_mask`, `position_ids` ((3,) batch,
sequence) and the past, in optimum's layout (models/generating/).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import EXPORT_PAST, EXPORT_SEQUENCE
from onnx_parity.models.vision_language.base import (
    IMAGE_FEATURES,
    INPUTS_EMBEDS,
    Image,
    PipelineContract,
)
from onnx_parity.settings import ModelSpec

FEATURES_AXES = {0: "image_tokens"}


def _part(spec: ModelSpec, suffix: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
          axes: dict[str, dict[int, str]], batch: dict[str, int | None]) -> ModelSpec:
    """A file of the pipeline: its own name, inputs, outputs and axes; exported by the tool
    (an `export-command` writes the decoder file only)."""
    return dataclasses.replace(
        spec, name=f"{spec.name}{suffix}", inputs={name: Path(name) for name in inputs},
        outputs=outputs, dynamic_axes=axes, batch_axis=batch, forward_kwargs={},
        export_command=None, axis_sizes={})


def vision_spec(spec: ModelSpec, contract: PipelineContract) -> ModelSpec:
    """`<name>.vision`: one image's inputs -> image_features; no batch axis anywhere."""
    axes = {**{name: dict(value) for name, value in contract.vision_axes.items()},
            IMAGE_FEATURES: dict(FEATURES_AXES)}
    names = (*contract.image_inputs, IMAGE_FEATURES)
    return _part(spec, ".vision", contract.image_inputs, (IMAGE_FEATURES,), axes,
                 dict.fromkeys(names))


def vision_samples(image: Image) -> dict[str, np.ndarray]:
    """One image as the vision file's samples (a samples axis of one in front)."""
    return {name: np.asarray(value)[None] for name, value in image.items()}


def embedding_spec(spec: ModelSpec) -> ModelSpec:
    """`<name>.embedding`: input_ids (batch, sequence), image_features (image_tokens, hidden)
    -> inputs_embeds (batch, sequence, hidden)."""
    axes = {"input_ids": {0: "batch", 1: "sequence"}, IMAGE_FEATURES: dict(FEATURES_AXES),
            INPUTS_EMBEDS: {0: "batch", 1: "sequence"}}
    return _part(spec, ".embedding", ("input_ids", IMAGE_FEATURES), (INPUTS_EMBEDS,), axes,
                 {IMAGE_FEATURES: None})


def embedding_samples(input_ids: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
    """The prompts' ids and their images' features (laid with a samples axis of one)."""
    return {"input_ids": np.asarray(input_ids, dtype=np.int64), IMAGE_FEATURES: features[None]}


def decoder_spec(spec: ModelSpec, contract: PipelineContract) -> ModelSpec:
    """The decoder `<name>`: inputs_embeds, attention_mask, position_ids, past -> logits and
    presents; position_ids (3, batch, sequence) hold the batch at axis 1."""
    cache = contract.cache
    position_axes = {1: "batch", 2: "sequence"} if contract.positions_3d else {
        0: "batch", 1: "sequence"}
    axes: dict[str, dict[int, str]] = {
        INPUTS_EMBEDS: {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"}, "position_ids": position_axes,
        **{name: {0: "batch", 1: "sequence"} for name in contract.decoder_extra},
        **{name: {0: "batch", 2: "past_sequence"} for name in cache.names("past_key_values")},
        "logits": {0: "batch", 1: "sequence"},
        **{name: {0: "batch", 2: "total_sequence"} for name in cache.names("present")}}
    batch: dict[str, int | None] = {"position_ids": 1} if contract.positions_3d else {}
    return dataclasses.replace(
        _part(spec, "", contract.decoder_inputs, cache.outputs, axes, batch),
        name=spec.name, forward_kwargs={"use_cache": True})


def decoder_samples(rows: int, contract: PipelineContract,
                    dtype: np.dtype[Any]) -> dict[str, np.ndarray]:
    """The exported step's samples: EXPORT_SEQUENCE random embeddings after a past of
    EXPORT_PAST positions (random keys and values), the mask all ones."""
    cache, past, length = contract.cache, EXPORT_PAST, EXPORT_SEQUENCE
    generator = np.random.default_rng(0)
    positions = np.tile(np.arange(past, past + length, dtype=np.int64), (rows, 1))
    step = {INPUTS_EMBEDS: generator.standard_normal(
                (rows, length, contract.hidden_size)).astype(dtype),
            "attention_mask": np.ones((rows, past + length), dtype=np.int64),
            # samples keep the batch on axis 0; the deployed (3, batch, sequence) moves it
            "position_ids": np.repeat(positions[:, None], 3, axis=1) if contract.positions_3d
            else positions,
            # decoder_extra: zeros, what every step after the prompt is fed
            **{name: np.zeros((rows, length), dtype=np.int64) for name in contract.decoder_extra}}
    for name, sizes in cache.past_shapes(rows, past).items():
        step[name] = generator.standard_normal(sizes).astype(dtype)
    return step
