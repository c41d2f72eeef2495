"""A vision-language model (`generate` on a `...ForConditionalGeneration` with a vision config)
as the pipeline it ships as: a vision file, an embedding file and a decoder with past.

- `<name>.vision.onnx`: ONE image's inputs (the family's `image_inputs`, e.g. Qwen2-VL's
  `pixel_values` (patches, dim) and `image_grid_thw` (1, 3)) -> `image_features`
  (image tokens, text hidden size). One image per call: Qwen2-VL's attention splits a batch of
  images by a data-dependent `lengths.tolist()` that dynamo refuses, and onnxruntime-genai runs
  Qwen's vision one image at a time too.
- `<name>.embedding.onnx`: `input_ids` (batch, sequence), `image_features` (image tokens,
  hidden) -> `inputs_embeds` (batch, sequence, hidden), the features placed at the image tokens
  inside the graph in order; zero image features (a text-only prompt, every generated token)
  are allowed.
- `<name>.onnx`: the decoder with past in optimum's layout (models/generating/'s names and axes),
  fed `inputs_embeds` in place of `input_ids`, and `position_ids` (3, batch, sequence) where the
  family uses multimodal rotary positions.

Each architecture is a `Family` (this module's Protocol) in a module of its own (`qwen2.py`,
...), listed in registry.py, which finds a model's family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from onnx_parity.models.generating.base import CacheShape
from onnx_parity.models.vision_config import image_token

IMAGE_FEATURES = "image_features"
INPUTS_EMBEDS = "inputs_embeds"


@dataclass(frozen=True)
class DerivedInput:
    """An input the samples lack that the tool derived, and why (shown to the user)."""

    name: str
    reason: str


@dataclass(frozen=True)
class PipelineContract:
    """What a VLM's three files take and give.

    `cache`: the decoder's cache (models/generating/), `positions` True (the decoder takes
    position_ids). `image_inputs`: the vision file's inputs for one image, in order.
    `image_token`: the id the processor placed once per image feature. `hidden_size`: the text
    model's width (image_features' and inputs_embeds' last axis). `positions_3d`: position_ids
    are (3, batch, sequence) (multimodal rotary positions), else (batch, sequence).
    `dynamic_resolution`: the vision file takes images of any (allowed) size, so one unseen
    resolution is checked too. `vision_axes`: the vision file's dynamic axes by input (those
    that vary with the image; image_features' token axis is always dynamic). `derived`: the
    sample inputs the tool derived, with reasons. `decoder_extra`: inputs (batch, sequence)
    of int64 the decoder also takes, after position_ids: the samples' values at the prompt
    pass, zeros at every later step (Gemma 3's token_type_ids, which make its image tokens
    attend to each other at the prompt and which transformers' generation drops after it).
    """

    cache: CacheShape
    image_inputs: tuple[str, ...]
    image_token: int
    hidden_size: int
    positions_3d: bool
    dynamic_resolution: bool
    vision_axes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    derived: tuple[DerivedInput, ...] = ()
    decoder_extra: tuple[str, ...] = ()

    @property
    def decoder_inputs(self) -> tuple[str, ...]:
        return (INPUTS_EMBEDS, "attention_mask", "position_ids", *self.decoder_extra,
                *self.cache.names("past_key_values"))


Image = dict[str, np.ndarray]  # one image's vision inputs, by name


class Family(Protocol):
    """One VLM architecture. Modules are the user's loaded model (`model`); arrays are numpy.

    The reference members run the MODEL's own code (its get_image_features, its placeholder
    merge, its rope index), never the wrappers, so a wrong wrapper is caught by the check.
    """

    name: str  # e.g. "qwen2-vl", shown in findings and the report

    def matches(self, model: Any) -> bool:
        """True for a model of this architecture (by its class or config's model_type)."""
        ...

    def contract(self, model: Any, cache: CacheShape) -> PipelineContract:
        """The pipeline's contract for this model, `cache` read by models/generating/."""
        ...

    def vision_module(self, model: Any) -> Any:
        """A torch module: one image's inputs (contract.image_inputs, by keyword) ->
        image_features (image tokens, hidden)."""
        ...

    def embedding_module(self, model: Any) -> Any:
        """A torch module: (input_ids (batch, sequence), image_features (tokens, hidden)) ->
        inputs_embeds, the features scattered at the image tokens in order; zero tokens and
        zero features allowed."""
        ...

    def decoder_module(self, model: Any) -> Any:
        """A torch module: (inputs_embeds, attention_mask, position_ids, past_key_values (a
        DynamicCache), use_cache) -> logits and presents, whose outputs flatten to optimum's
        `logits`, `present.N.key` / `.value`."""
        ...

    def images(self, samples: Mapping[str, np.ndarray]) -> list[Image]:
        """The samples' images, one input dict each, in image-token order (row by row)."""
        ...

    def rows(self, model: Any, samples: Mapping[str, np.ndarray],
             rows: slice) -> dict[str, np.ndarray]:
        """The samples of the prompt rows `rows`, their images (and only theirs) with them."""
        ...

    def derive(self, model: Any, samples: Mapping[str, np.ndarray], contract: PipelineContract
               ) -> tuple[dict[str, np.ndarray], tuple[DerivedInput, ...]]:
        """The samples completed with what the architecture needs and the user may omit
        (Qwen2-VL's mm_token_type_ids from the image token), and what was derived.
        Raises LoadError naming the key when the inputs cannot be the model's (a name it does
        not take, image tokens that do not match the images' features)."""
        ...

    def image_features(self, model: Any, image: Image) -> np.ndarray:
        """PyTorch's features of one image, by the model's own get_image_features."""
        ...

    def merged_embeddings(self, model: Any, input_ids: np.ndarray,
                          features: np.ndarray) -> np.ndarray:
        """PyTorch's inputs_embeds: the model's text embeddings with `features` placed by the
        model's own placeholder merge (masked_scatter at the image tokens)."""
        ...

    def prompt_positions(self, model: Any, samples: Mapping[str, np.ndarray]) -> np.ndarray:
        """The prompt pass's position_ids as transformers' generation computes them
        (Qwen: get_rope_index with mm_token_type_ids, (3, batch, sequence); 1-D families:
        the mask's cumsum - 1, 1 at padding)."""
        ...

    def step_positions(self, previous: np.ndarray) -> np.ndarray:
        """The next generated token's position_ids after the `previous` step's (transformers'
        generation: the last position plus one): (3, batch, 1) or (batch, 1)."""
        ...

    def unseen_image(self, model: Any, images: list[Image]) -> Image | None:
        """One image at a resolution the samples do not hold (dynamic families), else None."""
        ...

    def example_image(self, model: Any) -> Image:
        """One seeded image of a size the model takes: the vision file's export sample when
        the prompts hold no image (a text-only entry)."""
        ...


def token_of(model: Any) -> int:
    """The image token of a model a family matched (is_vision_language held for it)."""
    token = image_token(model)
    assert token is not None, "a family matches only a model with an image token"
    return token
