"""Idefics3 and SmolVLM (transformers' Idefics3ForConditionalGeneration and
SmolVLMForConditionalGeneration: a SigLIP-like tower over image tiles, a pixel-shuffle
connector, a Llama decoder) as a vision-language pipeline (vision_language/base.py's
`Family`).

The processor splits an image into tiles of the tower's size (and adds the whole image
resized), pads each prompt's tiles to the batch's most with all-zero tiles, and gives
`pixel_values` (batch, tiles, channels, size, size) and `pixel_attention_mask` (batch, tiles,
size, size). The vision file takes ONE prompt's real tiles, (1, tiles, ...), the tiles axis
dynamic: an image's resolution shows as its number of tiles. The model's get_image_features
drops the padding tiles with a data-dependent boolean index and splits by a `.tolist()`; for one
prompt's real tiles both are the identity, so the wrapper runs the model's own patch mask,
tower and connector without them. The connector's pixel shuffle takes a square patch grid
(`int(seq ** 0.5)`), which holds for every tile of the tower's size: the tile's size is fixed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import CacheShape
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_language import parts
from onnx_parity.models.vision_language.base import (
    DerivedInput,
    Family,
    Image,
    PipelineContract,
    token_of,
)

PIXELS, MASK = "pixel_values", "pixel_attention_mask"
IMAGE_INPUTS = (PIXELS, MASK)
TAKEN = ("input_ids", "attention_mask", *IMAGE_INPUTS)


@functools.cache
def _vision_class() -> type:
    import torch

    class Vision(torch.nn.Module):
        """One prompt's tiles through the model's patch mask, tower and connector."""

        def __init__(self, model: Any):
            super().__init__()
            self.inner = model.model
            self.training = False

        def forward(self, pixel_values: Any, pixel_attention_mask: Any) -> Any:
            inner = self.inner
            pixels = pixel_values.reshape(-1, *pixel_values.shape[2:]).to(inner.dtype)
            mask = pixel_attention_mask.reshape(-1, *pixel_attention_mask.shape[2:])
            patch = int(inner.config.vision_config.patch_size)
            grid = mask.unfold(1, patch, patch).unfold(2, patch, patch)
            patches = grid.sum(dim=(-1, -2)) > 0
            hidden = inner.vision_model(pixel_values=pixels, patch_attention_mask=patches,
                                        return_dict=True).last_hidden_state
            out = inner.connector(hidden)
            return out.reshape(-1, out.shape[-1])

    return Vision


def tokens_per_tile(model: Any) -> int:
    vision = model.config.vision_config
    patches = (int(vision.image_size) // int(vision.patch_size)) ** 2
    return patches // int(model.config.scale_factor) ** 2


def _real_tiles(pixels: np.ndarray) -> np.ndarray:
    """(batch, tiles): True where a tile is not all zeros (the processor's padding)."""
    return np.asarray(np.abs(pixels).reshape(*pixels.shape[:2], -1).max(-1) > 0)


class Idefics3(parts.TextPositions):
    """Idefics3 and SmolVLM; see the module's text."""

    name = "idefics3"

    def matches(self, model: Any) -> bool:
        kind = getattr(getattr(model, "config", None), "model_type", None)
        return kind in ("idefics3", "smolvlm")

    def contract(self, model: Any, cache: CacheShape) -> PipelineContract:
        hidden = int(model.config.get_text_config().hidden_size)
        return PipelineContract(cache, IMAGE_INPUTS, token_of(model), hidden, positions_3d=False,
                                dynamic_resolution=True,
                                vision_axes={name: {1: "tiles"} for name in IMAGE_INPUTS})

    def vision_module(self, model: Any) -> Any:
        return _vision_class()(model)

    def embedding_module(self, model: Any) -> Any:
        return parts.embedding_module(model, token_of(model))

    def decoder_module(self, model: Any) -> Any:
        return parts.decoder_module(model)

    def images(self, samples: Mapping[str, np.ndarray]) -> list[Image]:
        """Each prompt's real tiles, in row order (rows without an image give none)."""
        if PIXELS not in samples:
            return []
        pixels = np.asarray(samples[PIXELS])
        masks = np.asarray(samples[MASK]) if MASK in samples else None
        real = _real_tiles(pixels)
        taken: list[Image] = []
        for row in range(len(pixels)):
            if real[row].any():
                mask = masks[row] if masks is not None else np.ones(
                    (pixels.shape[1], *pixels.shape[3:]), dtype=np.int64)
                taken.append({PIXELS: pixels[row][real[row]][None],
                              MASK: mask[real[row]][None]})
        return taken

    def rows(self, model: Any, samples: Mapping[str, np.ndarray],  # noqa: ARG002
             rows: slice) -> dict[str, np.ndarray]:
        """The samples of prompt `rows`: every input sliced by row (the image inputs are
        batched by prompt), the image inputs left out when those rows hold no tile."""
        chosen = {name: np.asarray(value)[rows] for name, value in samples.items()}
        if PIXELS in chosen and not _real_tiles(chosen[PIXELS]).any():
            for name in IMAGE_INPUTS:
                chosen.pop(name, None)
        return chosen

    def derive(self, model: Any, samples: Mapping[str, np.ndarray], contract: PipelineContract
               ) -> tuple[dict[str, np.ndarray], tuple[DerivedInput, ...]]:
        parts.check_names("Idefics3", samples, TAKEN)
        if MASK in samples and PIXELS not in samples:
            raise LoadError(f"`inputs` gives {MASK} without {PIXELS}.",
                            fix=f"Give {PIXELS} with it (the processor returns both), or neither.")
        _check_tokens(samples, contract.image_token, tokens_per_tile(model))
        completed = dict(samples)
        if PIXELS not in samples or MASK in samples:
            return completed, ()
        pixels = np.asarray(samples[PIXELS])
        real = _real_tiles(pixels)[:, :, None, None]
        completed[MASK] = np.broadcast_to(real, (*pixels.shape[:2], *pixels.shape[3:])).astype(
            np.int64)
        return completed, (DerivedInput(MASK, (
            "derived from pixel_values (1 over every real tile, 0 over the all-zero padding "
            "tiles): the vision file takes it, and the processor's mask is 1 over a whole "
            "tile")),)

    def image_features(self, model: Any, image: Image) -> np.ndarray:
        import torch

        with torch.no_grad():
            out = model.get_image_features(torch.from_numpy(np.asarray(image[PIXELS])),
                                           torch.from_numpy(np.asarray(image[MASK])),
                                           return_dict=True)
        return parts.features(out)

    def merged_embeddings(self, model: Any, input_ids: np.ndarray,
                          features: np.ndarray) -> np.ndarray:
        """The model's own inputs_merger (masked_scatter at the image tokens)."""
        import torch

        ids = torch.from_numpy(np.asarray(input_ids))
        with torch.no_grad():
            embeds = model.get_input_embeddings()(ids)
            if not len(features):
                return np.asarray(embeds.float().numpy())
            given = torch.from_numpy(np.asarray(features)).to(embeds.dtype)
            return np.asarray(model.model.inputs_merger(ids, embeds, given).float().numpy())

    def unseen_image(self, model: Any, images: list[Image]) -> Image | None:
        """A tile count the samples lack: one more than the most, seeded random pixels."""
        return _tiles(model, max((int(image[PIXELS].shape[1]) for image in images),
                                 default=0) + 1)

    def example_image(self, model: Any) -> Image:
        """One tile of the tower's size, for prompts without images."""
        return _tiles(model, 1)


def _tiles(model: Any, count: int) -> Image:
    """`count` tiles of seeded pixels of the tower's size, every pixel real."""
    size = int(model.config.vision_config.image_size)
    channels = int(getattr(model.config.vision_config, "num_channels", 3))
    pixels = np.random.default_rng(0).standard_normal((1, count, channels, size, size))
    return {PIXELS: pixels.astype(np.float32),
            MASK: np.ones((1, count, size, size), dtype=np.int64)}


def _check_tokens(samples: Mapping[str, np.ndarray], token: int, per_tile: int) -> None:
    held = int((np.asarray(samples["input_ids"]) == token).sum())
    tiles = int(_real_tiles(np.asarray(samples[PIXELS])).sum()) if PIXELS in samples else 0
    if held != tiles * per_tile:
        raise LoadError(
            f"`inputs`: input_ids holds {held} image token(s) ({token}), and pixel_values' "
            f"{tiles} tile(s) (those not all zeros) make {tiles * per_tile} ({per_tile} each).",
            fix="Commit the input_ids, pixel_values and pixel_attention_mask the model's "
                "processor returned together for the same images.")


FAMILY: Family = Idefics3()  # mypy checks it against the Protocol
