"""The vision-language families, asked in order: a model's family is the first that matches it.

A new family is a module over base.py exposing FAMILY and a line in FAMILIES.
"""

from __future__ import annotations

from typing import Any

from onnx_parity.models.generating.base import PROMPTS
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_config import is_vision_language
from onnx_parity.models.vision_language import gemma3, idefics3, llava, qwen2
from onnx_parity.models.vision_language.base import Family

FAMILIES: tuple[Family, ...] = (qwen2.FAMILY, llava.FAMILY, idefics3.FAMILY, gemma3.FAMILY)


def family_of(model: Any) -> Family | None:
    """The family of a vision-language model, or None (not a VLM, or no family takes it)."""
    if not is_vision_language(model):
        return None
    return next((family for family in FAMILIES if family.matches(model)), None)


def declared_family(model: Any, name: str, inputs: tuple[str, ...]) -> Family | None:
    """The family a generating entry is checked by: None for a text model, and for a VLM
    declared with its prompts only (its text decoder checked alone); a VLM given image inputs
    that no family takes is a LoadError naming its architecture (never its images ignored)."""
    family = family_of(model)
    if family is not None or not is_vision_language(model) or set(inputs) <= set(PROMPTS):
        return family
    architecture = getattr(getattr(model, "config", None), "model_type", None) or "?"
    known = ", ".join(known.name for known in FAMILIES)
    raise LoadError(
        f'model "{name}": `inputs` gives {", ".join(sorted(inputs))}, the inputs of a '
        f"vision-language model, and its architecture ({architecture}) is not one this version "
        f"exports as vision, embedding and decoder files (it does: {known}).",
        fix="Check its text decoder alone with the prompts only, inputs = { input_ids = "
            '"samples/ids.npy", attention_mask = "samples/mask.npy" }, or declare a model of '
            "a supported architecture.")
