"""LLaVA (transformers' LlavaForConditionalGeneration: a CLIP-like vision tower, a projector and
a text decoder) as a vision-language pipeline (vision_language/base.py's `Family`).

The vision file takes ONE image, `pixel_values` (1, channels, size, size) at the one size the
vision tower was built for (its position table has one entry per patch), and runs the model's
own get_image_features (the configured hidden layer, the class token dropped under the
"default" strategy, the projector). Every image makes the same number of tokens; positions are
1-D, as transformers' generation computes them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from onnx_parity.models.generating.base import CacheShape
from onnx_parity.models.vision_language import parts
from onnx_parity.models.vision_language.base import (
    DerivedInput,
    Family,
    Image,
    PipelineContract,
    token_of,
)

IMAGE_INPUTS = ("pixel_values",)
TEXT_INPUTS = ("input_ids", "attention_mask")
TAKEN = (*TEXT_INPUTS, *IMAGE_INPUTS)


@functools.cache
def _vision_class() -> type:
    import torch

    class Vision(torch.nn.Module):
        """One image through the model's get_image_features: (tokens, hidden)."""

        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.training = False

        def forward(self, pixel_values: Any) -> Any:
            out = self.model.model.get_image_features(pixel_values, return_dict=True)
            return out.pooler_output[0]

    return Vision


def tokens_per_image(model: Any) -> int:
    """The image tokens one image makes: a token per patch, and the class token under the
    "full" strategy where the tower has one."""
    vision = model.config.vision_config
    patches = (int(vision.image_size) // int(vision.patch_size)) ** 2
    tower = model.model.vision_tower
    embeddings = getattr(getattr(tower, "vision_model", tower), "embeddings", None)
    cls = hasattr(embeddings, "class_embedding")
    full = model.config.vision_feature_select_strategy == "full"
    return patches + int(cls and full)


class Llava(parts.OneSize):
    """LLaVA; see the module's text."""

    name = "llava"

    def matches(self, model: Any) -> bool:
        return getattr(getattr(model, "config", None), "model_type", None) == "llava"

    def contract(self, model: Any, cache: CacheShape) -> PipelineContract:
        token = token_of(model)
        hidden = int(model.config.get_text_config().hidden_size)
        return PipelineContract(cache, IMAGE_INPUTS, token, hidden, positions_3d=False,
                                dynamic_resolution=False)

    def vision_module(self, model: Any) -> Any:
        return _vision_class()(model)

    def decoder_module(self, model: Any) -> Any:
        return parts.decoder_module(model)

    def images(self, samples: Mapping[str, np.ndarray]) -> list[Image]:
        return parts.fixed_images(samples)

    def rows(self, model: Any, samples: Mapping[str, np.ndarray],
             rows: slice) -> dict[str, np.ndarray]:
        return parts.fixed_rows(samples, rows, token_of(model), tokens_per_image(model),
                                   TEXT_INPUTS)

    def derive(self, model: Any, samples: Mapping[str, np.ndarray], contract: PipelineContract
               ) -> tuple[dict[str, np.ndarray], tuple[DerivedInput, ...]]:
        parts.check_names("LLaVA", samples, TAKEN)
        parts.check_fixed_tokens(samples, contract.image_token, tokens_per_image(model))
        return dict(samples), ()


FAMILY: Family = Llava()  # mypy checks it against the Protocol
