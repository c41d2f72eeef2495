"""Qwen2-VL as a vision-language pipeline (vision_language/base.py's `Family`).

The vision file takes ONE image: `pixel_values` (patches, channels * temporal * patch * patch)
and `image_grid_thw` (1, 3). The model's vision attention splits a batch of images with a
data-dependent `torch.split(lengths.tolist())` (dynamo refuses it, TorchScript drops
`image_grid_thw`); for one image (t = 1, every image the processor makes) that split is one
block, so the wrapper runs the model's own layers with the attention as one SDPA, and the
rotary positions computed from the grid's values with tensor arithmetic (no `.item()`).
Positions are multimodal (3, batch, sequence): the model's get_rope_index at the prompt,
then each position plus one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import CacheShape
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_language import parts
from onnx_parity.models.vision_language.base import DerivedInput, Image, PipelineContract, token_of

IMAGE_INPUTS = ("pixel_values", "image_grid_thw")
TAKEN = ("input_ids", "attention_mask", "mm_token_type_ids", *IMAGE_INPUTS)
TYPES = "mm_token_type_ids"


@functools.cache
def _vision_class() -> type:
    import torch
    from torch.nn import functional

    class Vision(torch.nn.Module):
        """One image through the model's vision tower: patch embedding, blocks, merger."""

        def __init__(self, visual: Any):
            super().__init__()
            self.visual = visual
            self.training = False

        def forward(self, pixel_values: Any, image_grid_thw: Any) -> Any:
            visual = self.visual
            hidden = visual.patch_embed(pixel_values.to(visual.get_dtype()))
            positions = _patch_positions(torch, hidden.shape[0], image_grid_thw,
                                         visual.spatial_merge_size)
            cos, sin = visual.rotary_pos_emb(hidden, positions)
            for block in visual.blocks:
                hidden = hidden + _attention(functional, block.attn, block.norm1(hidden),
                                             (cos, sin))
                hidden = hidden + block.mlp(block.norm2(hidden))
            return visual.merger(hidden)

    return Vision


def _patch_positions(torch: Any, patches: Any, grid: Any, merge: int) -> Any:
    """transformers' vision position ids (row, column) of one image's patches, block-major over
    merge x merge blocks, from the grid's values as tensors (its width need not be a constant)."""
    index = torch.arange(patches, device=grid.device) % (grid[0, 1] * grid[0, 2])
    block, inner = index // (merge * merge), index % (merge * merge)
    blocks_wide = grid[0, 2] // merge
    rows = (block // blocks_wide) * merge + inner // merge
    columns = (block % blocks_wide) * merge + inner % merge
    return torch.stack([rows, columns], dim=-1)


def _attention(functional: Any, attn: Any, hidden: Any, rotary: tuple[Any, Any]) -> Any:
    """The model's VisionAttention over one image: one SDPA, its own projections and rotary."""
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb_vision

    length = hidden.shape[0]
    query, key, value = attn.qkv(hidden).reshape(length, 3, attn.num_heads, -1).permute(
        1, 0, 2, 3).unbind(0)
    query, key = apply_rotary_pos_emb_vision(query, key, *rotary)
    heads = [tensor.transpose(0, 1).unsqueeze(0) for tensor in (query, key, value)]
    out = functional.scaled_dot_product_attention(*heads, scale=attn.scaling)
    return attn.proj(out.squeeze(0).transpose(0, 1).reshape(length, -1))


class Qwen2VL:
    """Qwen2-VL (transformers' Qwen2VLForConditionalGeneration); see the module's text."""

    name = "qwen2-vl"

    def matches(self, model: Any) -> bool:
        return getattr(getattr(model, "config", None), "model_type", None) == "qwen2_vl"

    def contract(self, model: Any, cache: CacheShape) -> PipelineContract:
        token = token_of(model)
        hidden = int(model.config.get_text_config().hidden_size)
        return PipelineContract(cache, IMAGE_INPUTS, token, hidden, positions_3d=True,
                                dynamic_resolution=True,
                                vision_axes={"pixel_values": {0: "patches"}})

    def vision_module(self, model: Any) -> Any:
        return _vision_class()(model.model.visual)

    def embedding_module(self, model: Any) -> Any:
        return parts.embedding_module(model, token_of(model))

    def decoder_module(self, model: Any) -> Any:
        return parts.decoder_module(model)  # fed 3-D position_ids, which it passes on

    def images(self, samples: Mapping[str, np.ndarray]) -> list[Image]:
        if "image_grid_thw" not in samples:
            return []
        grids = np.asarray(samples["image_grid_thw"]).astype(np.int64)
        ends = np.cumsum(grids.prod(-1))
        pixels = np.asarray(samples["pixel_values"])
        return [{"pixel_values": pixels[end - int(grid.prod()):end], "image_grid_thw": grid[None]}
                for grid, end in zip(grids, ends, strict=True)]

    def rows(self, model: Any, samples: Mapping[str, np.ndarray],
             rows: slice) -> dict[str, np.ndarray]:
        """The samples of prompt `rows`: their images' patches and grids with them."""
        chosen = {name: np.asarray(samples[name])[rows] for name in samples
                  if name not in IMAGE_INPUTS}
        images = self.images(samples)
        if not images:
            return chosen
        per_row = _images_per_row(samples, images, _merge(model))
        start = int(per_row[:rows.start or 0].sum())
        taken = images[start:start + int(per_row[rows].sum())]
        if taken:
            chosen["pixel_values"] = np.concatenate([image["pixel_values"] for image in taken])
            chosen["image_grid_thw"] = np.concatenate([image["image_grid_thw"] for image in taken])
        return chosen

    def derive(self, model: Any, samples: Mapping[str, np.ndarray], contract: PipelineContract
               ) -> tuple[dict[str, np.ndarray], tuple[DerivedInput, ...]]:
        unknown = sorted(set(samples) - set(TAKEN))
        if unknown:
            raise LoadError(
                f"`inputs` gives {', '.join(unknown)}, which Qwen2-VL does not take.",
                fix=f"Give only {', '.join(TAKEN)} (what its processor returns) in [model.inputs].")
        if ("pixel_values" in samples) != ("image_grid_thw" in samples):
            raise LoadError("`inputs` gives one of pixel_values and image_grid_thw without the "
                            "other.", fix="Give both (the processor returns both), or neither.")
        _check_tokens(samples, self.images(samples), contract.image_token, _merge(model))
        completed = dict(samples)
        if TYPES in samples:
            return completed, ()
        ids = np.asarray(samples["input_ids"])
        completed[TYPES] = (ids == contract.image_token).astype(np.int64)
        return completed, (DerivedInput(TYPES, (
            f"derived from the image token {contract.image_token} in input_ids (1 at an image "
            "token, 0 elsewhere): Qwen2-VL computes its 3-D rotary positions from it")),)

    def image_features(self, model: Any, image: Image) -> np.ndarray:
        import torch

        with torch.no_grad():
            out = model.get_image_features(
                torch.from_numpy(np.asarray(image["pixel_values"])),
                torch.from_numpy(np.asarray(image["image_grid_thw"])), return_dict=True)
        return np.asarray(torch.cat(out.pooler_output).float().numpy())

    def merged_embeddings(self, model: Any, input_ids: np.ndarray,
                          features: np.ndarray) -> np.ndarray:
        import torch

        ids = torch.from_numpy(np.asarray(input_ids))
        with torch.no_grad():
            embeds = model.get_input_embeddings()(ids)
            if not len(features):
                return np.asarray(embeds.float().numpy())
            given = torch.from_numpy(np.asarray(features)).to(embeds.dtype)
            mask, _ = model.model.get_placeholder_mask(ids, inputs_embeds=embeds,
                                                       image_features=given)
            return np.asarray(embeds.masked_scatter(mask, given).float().numpy())

    def prompt_positions(self, model: Any, samples: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        given = {name: torch.from_numpy(np.asarray(value)) for name, value in samples.items()}
        with torch.no_grad():
            positions = model._prepare_position_ids_for_generation(given["input_ids"], given)
        return np.asarray(positions[1:].numpy()).astype(np.int64)  # row 0: text positions

    def step_positions(self, previous: np.ndarray) -> np.ndarray:
        return parts.step_positions(previous)  # each of the three rows plus one

    def unseen_image(self, model: Any, images: list[Image]) -> Image | None:
        """A grid the samples lack: one merge block taller than the largest image (of
        the most patches), patches drawn from a seeded generator."""
        if not images:
            return None
        merge = _merge(model)
        grids = {tuple(int(v) for v in image["image_grid_thw"][0]) for image in images}
        t, h, w = max(grids, key=lambda grid: grid[1] * grid[2])
        height = h + merge
        while (t, height, w) in grids:
            height += merge
        return _image(model, (t, height, w), images[0]["pixel_values"].dtype)

    def example_image(self, model: Any) -> Image:
        merge = _merge(model)
        return _image(model, (1, 2 * merge, 2 * merge), np.dtype(np.float32))


def _image(model: Any, grid: tuple[int, int, int], dtype: np.dtype[Any]) -> Image:
    """Seeded patches of one image of `grid` (t, h, w), as the processor lays them out."""
    vision = model.config.vision_config
    width = vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2
    pixels = np.random.default_rng(0).standard_normal((int(np.prod(grid)), width))
    return {"pixel_values": pixels.astype(dtype),
            "image_grid_thw": np.array([grid], dtype=np.int64)}


def _merge(model: Any) -> int:
    return int(model.config.vision_config.spatial_merge_size)


def _check_tokens(samples: Mapping[str, np.ndarray], images: list[Image], token: int,
                  merge: int) -> None:
    """The prompts' image tokens against the images' features (t * h * w / merge**2 each)."""
    held = int((np.asarray(samples["input_ids"]) == token).sum())
    features = sum(int(image["image_grid_thw"].prod()) // (merge * merge) for image in images)
    if held != features:
        raise LoadError(
            f"`inputs`: input_ids holds {held} image token(s) ({token}), and image_grid_thw's "
            f"{len(images)} image(s) make {features} feature(s) (t * h * w / {merge * merge} "
            "each).", fix="Commit the input_ids, pixel_values and image_grid_thw the model's "
            "processor returned together for the same images.")


def _images_per_row(samples: Mapping[str, np.ndarray], images: list[Image],
                    merge: int) -> np.ndarray:
    """How many of the images each prompt row holds, from its image tokens in order."""
    tokens = [int(image["image_grid_thw"].prod()) // (merge * merge) for image in images]
    types = np.asarray(samples[TYPES]) if TYPES in samples else None
    assert types is not None
    counts, index = [], 0
    for row in (types == 1):
        held, need = int(row.sum()), 0
        start = index
        while need < held and index < len(tokens):
            need += tokens[index]
            index += 1
        counts.append(index - start)
    return np.asarray(counts, dtype=np.int64)


FAMILY = Qwen2VL()
