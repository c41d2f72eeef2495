"""A vision-language model recognised from its config: a `vision_config` and an image token.

Asked by generating/ (a VLM's image inputs are its family's to check, not the decoder's) and by
vision_language/ (which family takes it): a module of its own, so that generating/ needs nothing
of vision_language/, which builds on it.
"""

from __future__ import annotations

from typing import Any

IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index")


def image_token(model: Any) -> int | None:
    """The image token of a model's config (image_token_id or image_token_index)."""
    config = getattr(model, "config", None)
    for key in IMAGE_TOKEN_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    return None


def is_vision_language(model: Any) -> bool:
    """A transformers model whose config has a vision_config and an image token."""
    config = getattr(model, "config", None)
    return getattr(config, "vision_config", None) is not None and image_token(model) is not None
