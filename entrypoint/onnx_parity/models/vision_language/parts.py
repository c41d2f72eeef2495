"""What the vision-language families share: the embedding and decoder wrappers (every family),
the 1-D positions (`TextPositions`: LLaVA, Idefics3, Gemma 3), and what a family of one image
size takes from the model's own code (`OneSize`: LLaVA, Gemma 3), with the sample rules of a
family whose every image makes the same number of image tokens.

The embedding places the features at the image tokens in order (masked_scatter's order, row by
row) with a gather, so that zero features (a text-only prompt, every generated token) and an
image token past the features given (a generated one: embedded as text, as PyTorch does) need
no branch. A family whose image token lies outside the text vocabulary (Gemma 3 may) embeds it
as token 0 first, as its forward does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_language.base import Image, token_of


@functools.cache
def _wrappers() -> tuple[type, type]:
    import torch

    class Embedding(torch.nn.Module):
        """input_ids and image_features -> inputs_embeds, the features at the image tokens."""

        def __init__(self, model: Any, token: int):
            super().__init__()
            self.embed, self.token = model.get_input_embeddings(), token
            self.outside = token >= int(model.config.get_text_config().vocab_size)
            self.training = False

        def forward(self, input_ids: Any, image_features: Any) -> Any:
            images = input_ids == self.token
            text = torch.where(images, 0, input_ids) if self.outside else input_ids
            embeds = self.embed(text)
            flat = images.reshape(-1)
            order = torch.cumsum(flat.to(torch.int64), 0) - 1
            count = image_features.shape[0]
            placed = flat & (order < count)
            padded = torch.cat([image_features.to(embeds.dtype),
                                embeds.new_zeros((1, embeds.shape[-1]))], 0)
            picked = padded[torch.where(placed, order, torch.full_like(order, count))]
            merged = torch.where(placed[:, None], picked, embeds.reshape(-1, embeds.shape[-1]))
            return merged.reshape(embeds.shape)

    class Decoder(torch.nn.Module):
        """The model's own forward fed inputs_embeds, with its cache."""

        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.training = False

        def forward(self, inputs_embeds: Any, attention_mask: Any, position_ids: Any,
                    past_key_values: Any = None, use_cache: bool = True) -> Any:
            return self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                              position_ids=position_ids, past_key_values=past_key_values,
                              use_cache=use_cache)

    return Embedding, Decoder


def embedding_module(model: Any, token: int) -> Any:
    return _wrappers()[0](model, token)


def decoder_module(model: Any) -> Any:
    return _wrappers()[1](model)


def prompt_positions(model: Any, samples: Mapping[str, np.ndarray]) -> np.ndarray:
    """transformers' generation's position_ids of the prompts (the mask's cumsum - 1, 0 at
    padding), by the model's own method."""
    import torch

    given = {name: torch.from_numpy(np.asarray(samples[name]))
             for name in ("input_ids", "attention_mask") if name in samples}
    with torch.no_grad():
        positions = model._prepare_position_ids_for_generation(given["input_ids"], given)
    return np.asarray(positions.numpy()).astype(np.int64)


def step_positions(previous: np.ndarray) -> np.ndarray:
    return (previous[..., -1:] + 1).astype(np.int64)


def merged(model: Any, input_ids: np.ndarray, features: np.ndarray, token: int) -> np.ndarray:
    """The model's embeddings with `features` at the image tokens by masked_scatter, as its
    forward merges them (an image token outside the vocabulary embedded as 0 first)."""
    import torch

    ids = torch.from_numpy(np.asarray(input_ids))
    if token >= int(model.config.get_text_config().vocab_size):
        ids = torch.where(ids == token, 0, ids)
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        if not len(features):
            return np.asarray(embeds.float().numpy())
        mask = (torch.from_numpy(np.asarray(input_ids)) == token)[..., None]
        given = torch.from_numpy(np.asarray(features)).to(embeds.dtype)
        return np.asarray(embeds.masked_scatter(mask, given).float().numpy())


def check_names(family: str, samples: Mapping[str, np.ndarray], taken: tuple[str, ...]) -> None:
    unknown = sorted(set(samples) - set(taken))
    if unknown:
        raise LoadError(
            f"`inputs` gives {', '.join(unknown)}, which {family} does not take.",
            fix=f"Give only {', '.join(taken)} (what its processor returns) in [model.inputs].")


def fixed_images(samples: Mapping[str, np.ndarray]) -> list[Image]:
    """One image per row of pixel_values (images, channels, height, width)."""
    if "pixel_values" not in samples:
        return []
    pixels = np.asarray(samples["pixel_values"])
    return [{"pixel_values": pixels[index:index + 1]} for index in range(len(pixels))]


def check_fixed_tokens(samples: Mapping[str, np.ndarray], token: int, per_image: int) -> None:
    """The prompts' image tokens against the images: `per_image` tokens each."""
    held = int((np.asarray(samples["input_ids"]) == token).sum())
    images = len(fixed_images(samples))
    if held != images * per_image:
        raise LoadError(
            f"`inputs`: input_ids holds {held} image token(s) ({token}), and pixel_values' "
            f"{images} image(s) make {images * per_image} ({per_image} each).",
            fix="Commit the input_ids and pixel_values the model's processor returned together "
                "for the same images.")


def fixed_rows(samples: Mapping[str, np.ndarray], rows: slice, token: int, per_image: int,
               per_row: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The samples of prompt `rows` (the inputs `per_row` sliced), their images with them."""
    chosen = {name: np.asarray(samples[name])[rows] for name in per_row if name in samples}
    if "pixel_values" not in samples:
        return chosen
    counts = (np.asarray(samples["input_ids"]) == token).sum(-1) // per_image
    start = int(counts[:rows.start or 0].sum())
    taken = int(counts[rows].sum())
    if taken:
        chosen["pixel_values"] = np.asarray(samples["pixel_values"])[start:start + taken]
    return chosen


def example_image(model: Any) -> Image:
    """One seeded image of the tower's size: a one-size family's image when the prompts hold
    none (the vision file's export sample)."""
    vision = model.config.vision_config
    size, channels = int(vision.image_size), int(getattr(vision, "num_channels", 3))
    pixels = np.random.default_rng(0).standard_normal((1, channels, size, size))
    return {"pixel_values": pixels.astype(np.float32)}


def features(out: Any) -> np.ndarray:
    """get_image_features' pooled output (a tensor or one per image) as (tokens, hidden)."""
    import torch

    pooled = out.pooler_output
    joined = torch.cat(list(pooled)) if isinstance(pooled, (list, tuple)) else pooled
    return np.asarray(joined.reshape(-1, joined.shape[-1]).float().numpy())


class TextPositions:
    """1-D positions: transformers' generation's at the prompt, then the last plus one."""

    def prompt_positions(self, model: Any, samples: Mapping[str, np.ndarray]) -> np.ndarray:
        return prompt_positions(model, samples)

    def step_positions(self, previous: np.ndarray) -> np.ndarray:
        return step_positions(previous)


class OneSize(TextPositions):
    """A family of one image size: the model's get_image_features of pixel_values alone, its
    masked_scatter merge, no unseen resolution, a seeded image of the tower's size for prompts
    without images."""

    def embedding_module(self, model: Any) -> Any:
        return embedding_module(model, token_of(model))

    def image_features(self, model: Any, image: Image) -> np.ndarray:
        import torch

        with torch.no_grad():
            out = model.get_image_features(torch.from_numpy(np.asarray(image["pixel_values"])),
                                           return_dict=True)
        return features(out)

    def merged_embeddings(self, model: Any, input_ids: np.ndarray,
                          features: np.ndarray) -> np.ndarray:
        return merged(model, input_ids, features, token_of(model))

    def unseen_image(self, model: Any, images: list[Image]) -> Image | None:  # noqa: ARG002
        return None  # one size

    def example_image(self, model: Any) -> Image:
        return example_image(model)
