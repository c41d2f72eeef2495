"""Tiny seeded LLaVA, Idefics3 and Gemma 3 models and their processor-shaped samples, for
tests/test_vision_language_families.py: `SOURCE` is the factory module the CLI test writes into
its repository (models/vlm.py); `samples()` the prompts of each (one image, two images or
Idefics3's tiles at two counts, and a text-only row, left-padded)."""

from __future__ import annotations

import numpy as np

from fixture_repo.harness import left_padded

SOURCE = '''
import torch

IMAGE = 127  # the image token of every tiny model: the last id of a 128-token vocabulary


def _spread(model):
    """Zero-initialised weights (biases, Gemma 3's projector) drawn at random: a projector
    of zeros would make every image feature 0 and the vision check empty."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            if not parameter.any():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model.eval()


def _llama(**text):
    from transformers import LlamaConfig

    return LlamaConfig(**{**dict(vocab_size=128, hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, max_position_embeddings=128,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=None), **text})


def llava(strategy="default", layer=-2, **text):
    """CLIP tower of 32x32 images in 8x8 patches (16 tokens an image; 17 with the class token
    under the "full" strategy), Llama decoder (`text`: its config's keys replaced)."""
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, image_size=32, patch_size=8,
                              projection_dim=32)
    return _spread(LlavaForConditionalGeneration(LlavaConfig(
        vision_config=vision, text_config=_llama(**text), image_token_id=IMAGE,
        vision_feature_layer=layer, vision_feature_select_strategy=strategy,
        image_seq_length=16)))


def idefics3():
    """Tiles of 32x32 in 8x8 patches, pixel-shuffled by 2 (4 tokens a tile), Llama decoder."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration
    from transformers.models.idefics3.configuration_idefics3 import Idefics3VisionConfig

    torch.manual_seed(0)
    vision = Idefics3VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, image_size=32, patch_size=8)
    return _spread(Idefics3ForConditionalGeneration(Idefics3Config(
        vision_config=vision, text_config=_llama(), image_token_id=IMAGE, scale_factor=2)))


def smolvlm():
    """Idefics3's layout under SmolVLM's classes (model_type "smolvlm")."""
    from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration
    from transformers.models.smolvlm.configuration_smolvlm import SmolVLMVisionConfig

    torch.manual_seed(0)
    vision = SmolVLMVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, image_size=32, patch_size=8)
    return _spread(SmolVLMForConditionalGeneration(SmolVLMConfig(
        vision_config=vision, text_config=_llama(), image_token_id=IMAGE, scale_factor=2)))


def gemma3(vocab_size=128, sliding_window=512):
    """SigLIP tower of 32x32 images pooled to 4 tokens, a Gemma 3 decoder of one sliding and
    one full layer; `vocab_size` 127 puts the image token outside the vocabulary."""
    from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig,
                              SiglipVisionConfig)

    torch.manual_seed(0)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=2, image_size=32, patch_size=8)
    text = Gemma3TextConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=8, max_position_embeddings=128,
                            sliding_window=sliding_window,
                            layer_types=["sliding_attention", "full_attention"],
                            pad_token_id=0, bos_token_id=2, eos_token_id=None)
    return _spread(Gemma3ForConditionalGeneration(Gemma3Config(
        vision_config=vision, text_config=text, mm_tokens_per_image=4, image_token_index=IMAGE,
        boi_token_index=125, eoi_token_index=126)))
'''

IMAGE = 127
SIZE = 32


def _rows(pieces: list[list[int]], generator: np.random.Generator) -> dict[str, np.ndarray]:
    """Prompts from pieces: a positive count is that many text tokens, a negative count that
    many image tokens; left-padded to the longest with mask 0."""
    rows = [np.concatenate([generator.integers(3, 100, count) if count > 0
                            else np.full(-count, IMAGE) for count in row]) for row in pieces]
    return left_padded([row.tolist() for row in rows])


def llava_samples() -> dict[str, np.ndarray]:
    """Row 0 one image, row 1 two, row 2 text only (16 tokens an image)."""
    generator = np.random.default_rng(0)
    prompts = _rows([[3, -16, 3], [2, -16, 2, -16, 2], [6]], generator)
    pixels = generator.standard_normal((3, 3, SIZE, SIZE)).astype(np.float32)
    return {**prompts, "pixel_values": pixels}


def llava_full_samples() -> dict[str, np.ndarray]:
    """llava_samples' layout with 17 tokens an image (the "full" strategy keeps the class
    token)."""
    generator = np.random.default_rng(3)
    prompts = _rows([[3, -17, 3], [2, -17, 2, -17, 2], [6]], generator)
    pixels = generator.standard_normal((3, 3, SIZE, SIZE)).astype(np.float32)
    return {**prompts, "pixel_values": pixels}


def gemma3_samples() -> dict[str, np.ndarray]:
    """Row 0 one image, row 1 two, row 2 text only (4 tokens an image, between its begin and
    end tokens); token_type_ids 1 at the image tokens, as the processor gives them."""
    generator = np.random.default_rng(1)
    prompts = _rows([[3, -4, 3], [2, -4, 2, -4, 2], [6]], generator)
    pixels = generator.standard_normal((3, 3, SIZE, SIZE)).astype(np.float32)
    types = (prompts["input_ids"] == IMAGE).astype(np.int64)
    return {**prompts, "pixel_values": pixels, "token_type_ids": types}


def idefics3_samples() -> dict[str, np.ndarray]:
    """Row 0 an image split in 2x2 tiles and the whole (5 tiles, 20 tokens), row 1 one small
    enough for one tile (4 tokens), row 2 text only: two resolutions, as tile counts. The
    processor pads a prompt's tiles to the batch's most with all-zero tiles."""
    generator = np.random.default_rng(2)
    prompts = _rows([[3, -20, 3], [4, -4, 4], [6]], generator)
    pixels = np.zeros((3, 5, 3, SIZE, SIZE), dtype=np.float32)
    mask = np.zeros((3, 5, SIZE, SIZE), dtype=np.int64)
    for row, tiles in ((0, 5), (1, 1)):
        pixels[row, :tiles] = generator.standard_normal((tiles, 3, SIZE, SIZE))
        mask[row, :tiles] = 1
    return {**prompts, "pixel_values": pixels, "pixel_attention_mask": mask}


SAMPLES = {"llava": llava_samples, "idefics3": idefics3_samples, "gemma3": gemma3_samples}
