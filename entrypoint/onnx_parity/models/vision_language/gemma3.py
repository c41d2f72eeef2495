"""Gemma 3 (transformers' Gemma3ForConditionalGeneration: a SigLIP tower at one size, a
pooling projector to `mm_tokens_per_image` tokens, a Gemma 3 decoder) as a vision-language
pipeline (vision_language/base.py's `Family`).

Gemma 3's image tokens attend to each other both ways at the prompt (each image's block; text
stays causal): its forward builds that mask from `token_type_ids` (1 at an image token), and
transformers' generation passes them at the prompt only. So the decoder file takes
`token_type_ids` (batch, sequence) after position_ids (the contract's `decoder_extra`): the
samples' values at the prompt pass, zeros at every later step, where its mask is the causal
one. Fed zeros at the prompt, a tiny model's first logits differ by 0.035. The embedding scales
by sqrt(hidden) inside the model's own embedding table, so the wrapper scales as the model
does. Chosen over PaliGemma, whose forward applies its prefix mask only while its cache is
empty (a Python condition an export from a past of 3 would fix); Gemma 3's applies the image
blocks whenever token_type_ids are given, so one decoder graph serves prompt and steps.
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

IMAGE_INPUTS = ("pixel_values",)
TYPES = "token_type_ids"
TEXT_INPUTS = ("input_ids", "attention_mask", TYPES)
TAKEN = (*TEXT_INPUTS, *IMAGE_INPUTS)


@functools.cache
def _wrappers() -> tuple[type, type]:
    import torch

    class Vision(torch.nn.Module):
        """One image through the model's get_image_features: (tokens, hidden)."""

        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.training = False

        def forward(self, pixel_values: Any) -> Any:
            out = self.model.model.get_image_features(pixel_values, return_dict=True)
            pooled = out.pooler_output
            return pooled.reshape(-1, pooled.shape[-1])

    class Decoder(torch.nn.Module):
        """The model's forward fed inputs_embeds and token_type_ids, with its cache."""

        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.training = False

        def forward(self, inputs_embeds: Any, attention_mask: Any, position_ids: Any,
                    token_type_ids: Any, past_key_values: Any = None,
                    use_cache: bool = True) -> Any:
            return self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                              position_ids=position_ids, token_type_ids=token_type_ids,
                              past_key_values=past_key_values, use_cache=use_cache)

    return Vision, Decoder


class Gemma3(parts.OneSize):
    """Gemma 3; see the module's text."""

    name = "gemma3"

    def matches(self, model: Any) -> bool:
        return getattr(getattr(model, "config", None), "model_type", None) == "gemma3"

    def contract(self, model: Any, cache: CacheShape) -> PipelineContract:
        hidden = int(model.config.get_text_config().hidden_size)
        return PipelineContract(cache, IMAGE_INPUTS, token_of(model), hidden, positions_3d=False,
                                dynamic_resolution=False, decoder_extra=(TYPES,))

    def vision_module(self, model: Any) -> Any:
        return _wrappers()[0](model)

    def decoder_module(self, model: Any) -> Any:
        return _wrappers()[1](model)

    def images(self, samples: Mapping[str, np.ndarray]) -> list[Image]:
        return parts.fixed_images(samples)

    def rows(self, model: Any, samples: Mapping[str, np.ndarray],
             rows: slice) -> dict[str, np.ndarray]:
        return parts.fixed_rows(samples, rows, token_of(model), _per_image(model), TEXT_INPUTS)

    def derive(self, model: Any, samples: Mapping[str, np.ndarray], contract: PipelineContract
               ) -> tuple[dict[str, np.ndarray], tuple[DerivedInput, ...]]:
        parts.check_names("Gemma 3", samples, TAKEN)
        parts.check_fixed_tokens(samples, contract.image_token, _per_image(model))
        completed = dict(samples)
        ids = np.asarray(samples["input_ids"])
        derived = (ids == contract.image_token).astype(np.int64)
        if TYPES not in samples:
            completed[TYPES] = derived
            return completed, (DerivedInput(TYPES, (
                f"derived from the image token {contract.image_token} in input_ids (1 at an "
                "image token, 0 elsewhere), as Gemma 3's processor makes them: its image "
                "tokens attend to each other both ways at the prompt")),)
        if not np.array_equal(np.asarray(samples[TYPES]) != 0, derived != 0):
            raise LoadError(
                f"`inputs`: {TYPES} is not 1 exactly at the image tokens "
                f"({contract.image_token}) of input_ids.",
                fix=f"Commit the {TYPES} Gemma 3's processor returned with the input_ids, or "
                    "leave it out and it is derived from the image token.")
        return completed, ()



def _per_image(model: Any) -> int:
    return int(model.config.mm_tokens_per_image)


FAMILY: Family = Gemma3()  # mypy checks it against the Protocol
