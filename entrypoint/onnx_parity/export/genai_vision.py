"""`genai_config.json` for a vision-language model: the decoder's section from onnxruntime-genai's
model builder (genai_config.py, run with `exclude_embeds`, so the decoder takes
`inputs_embeds`), with the vision and embedding sections its runtime reads (its
MultiModalLanguageModel: `model.vision`, `model.embedding`), which the builder does not write
(its own VLM configs are written by hand, the examples say).

onnxruntime-genai 0.18 runs Qwen2.5-VL as type `qwen2_5_vl` with the contract our files have:
the vision file takes one image's `pixel_values` (patches, dim) and `image_grid_thw` (1, 3) and
returns `image_features` (tokens, hidden) (several images: it calls the file once per image),
the embedding file takes `input_ids` and `image_features` (none after the prompt), the decoder
`inputs_embeds`, `attention_mask` and 3-D `position_ids`, which the runtime computes itself
from `image_grid_thw` and the `vision_start_token_id` before each image. Qwen2-VL's files load
as the same type: its text model and rope index are Qwen2.5-VL's (measured: a tiny Qwen2-VL's
and a tiny Qwen2.5-VL's bundles generate PyTorch's greedy tokens). Gemma 3 is its `gemma3`
type (vision: `pixel_values` only), for a decoder that takes nothing genai does not feed (ours
takes `token_type_ids`: a BundleError). Other architectures have no vision type in 0.18.

The runtime's own processor (`create_multimodal_processor`) reads `processor_config.json`,
named by `model.vision.config_filename`: written for the Qwen types from the checkpoint's
`preprocessor_config.json`, or transformers' Qwen2-VL image processor defaults with the
model's patch and merge sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.export.genai_config import FED, BundleError

# transformers' model_type -> onnxruntime-genai 0.18's vision-language model type.
GENAI_VISION_TYPES = {"qwen2_vl": "qwen2_5_vl", "qwen2_5_vl": "qwen2_5_vl", "gemma3": "gemma3"}
RUNTIME_TYPES = "qwen2_5_vl, qwen3_vl, gemma3, phi3v, phi4mm, mistral3, lfm2_vl"
QWEN_TYPES = frozenset(("qwen2_5_vl",))
TOKEN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id")
PROCESSOR = "processor_config.json"
VISION_FILE, EMBEDDING_FILE = "vision.onnx", "embedding.onnx"
# transformers' Qwen2-VL image processor defaults (min/max pixels, CLIP's mean and std).
QWEN_PIXELS = {"min_pixels": 56 * 56, "max_pixels": 14 * 14 * 4 * 16384,
               "image_mean": [0.48145466, 0.4578275, 0.40821073],
               "image_std": [0.26862954, 0.26130258, 0.27577711],
               "rescale_factor": 1 / 255}


@dataclass(frozen=True)
class Part:
    """One file of the pipeline as exported: its input and output names."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class VisionParts:
    """The vision and embedding files beside the decoder (`<name>.vision.onnx`,
    `<name>.embedding.onnx`), whose sections genai_config.json gains."""

    vision: Part
    embedding: Part


def genai_vision_type(config: Any) -> str:
    """onnxruntime-genai's type for a VLM's config, or a BundleError naming what it runs."""
    model_type = getattr(config, "model_type", None)
    kind = GENAI_VISION_TYPES.get(str(model_type))
    if kind is None:
        raise BundleError(f"onnxruntime-genai 0.18 has no vision-language type for "
                          f"{model_type!r} (it runs {RUNTIME_TYPES})")
    return kind


def with_vision(document: dict[str, Any], config: Any, parts: VisionParts,
                checkpoint: Path | None, decoder_inputs: tuple[str, ...]
                ) -> dict[str, dict[str, Any]]:
    """genai_config.json (the builder's, laid out for the decoder file) with the vision and
    embedding sections, and processor_config.json where the type has one; by file name."""
    model = document["model"]
    kind = genai_vision_type(config)
    unfed = [name for name in decoder_inputs
             if name not in FED and not name.startswith("past_key_values.")]
    if unfed:  # Gemma 3's token_type_ids: genai's gemma3 feeds its decoder none
        raise BundleError(f"the decoder file takes {', '.join(unfed)}, which onnxruntime-genai's "
                          f"{kind} does not feed it")
    model["type"] = kind
    model.update(_tokens(config))
    model["embedding"] = _embedding(parts.embedding)
    model["vision"] = _vision(parts.vision, config, kind)
    documents = {"genai_config.json": document}
    if kind in QWEN_TYPES:
        model["vision"]["config_filename"] = PROCESSOR
        documents[PROCESSOR] = qwen_processor(config.vision_config, checkpoint)
    return documents


def _tokens(config: Any) -> dict[str, int]:
    found = {key: getattr(config, key, None) for key in TOKEN_KEYS}
    return {key: value for key, value in found.items() if isinstance(value, int)}


def _embedding(part: Part) -> dict[str, Any]:
    wanted = ("input_ids", "image_features")
    missing = [name for name in wanted if name not in part.inputs]
    if missing or "inputs_embeds" not in part.outputs:
        raise BundleError(f"the embedding file lacks {', '.join(missing) or 'inputs_embeds'}, "
                          "which onnxruntime-genai feeds or reads")
    return {"filename": EMBEDDING_FILE, "inputs": {name: name for name in wanted},
            "outputs": {"inputs_embeds": "inputs_embeds"}}


def _vision(part: Part, config: Any, kind: str) -> dict[str, Any]:
    wanted = ("pixel_values", "image_grid_thw") if kind in QWEN_TYPES else ("pixel_values",)
    missing = [name for name in wanted if name not in part.inputs]
    if missing or "image_features" not in part.outputs:
        raise BundleError(f"the vision file lacks {', '.join(missing) or 'image_features'}, "
                          f"which onnxruntime-genai's {kind} feeds or reads")
    section: dict[str, Any] = {"filename": VISION_FILE,
                               "inputs": {name: name for name in wanted},
                               "outputs": {"image_features": "image_features"}}
    if kind in QWEN_TYPES:
        vision = config.vision_config
        section["spatial_merge_size"] = int(vision.spatial_merge_size)
        section["patch_size"] = int(vision.patch_size)
    return section


def qwen_processor(vision: Any, checkpoint: Path | None) -> dict[str, Any]:
    """onnxruntime-genai's Qwen image pipeline (decode, RGB, smart resize, rescale, normalize,
    patch) with the checkpoint's processor values where it has them."""
    given = _preprocessor(checkpoint)
    pixels = {**QWEN_PIXELS, **{key: given[key] for key in QWEN_PIXELS if key in given}}
    sizes = {"patch_size": int(vision.patch_size), "merge_size": int(vision.spatial_merge_size)}
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("decode_image", "DecodeImage", {"color_space": "RGB"}),
        ("convert_to_rgb", "ConvertRGB", {}),
        ("resize", "Resize", {"width": 540, "height": 360, "smart_resize": 1,
                              "min_pixels": pixels["min_pixels"],
                              "max_pixels": pixels["max_pixels"], **sizes}),
        ("rescale", "Rescale", {"rescale_factor": pixels["rescale_factor"]}),
        ("normalize", "Normalize", {"mean": pixels["image_mean"], "std": pixels["image_std"],
                                    "qwen2_5_vl": 1}),
        ("patch_image", "PatchImage", {**sizes,
                                       "temporal_patch_size": int(vision.temporal_patch_size)})]
    transforms = [{"operation": {"name": name, "type": kind, **({"attrs": attrs} if attrs else {})}}
                  for name, kind, attrs in steps]
    return {"processor": {"name": "qwen2_5_image_processor", "transforms": transforms}}


def _preprocessor(checkpoint: Path | None) -> dict[str, Any]:
    """The checkpoint's preprocessor_config.json (min/max pixels, mean, std), where it has one;
    transformers 5 writes the bounds as `size` {shortest_edge, longest_edge}."""
    file = None if checkpoint is None else checkpoint / "preprocessor_config.json"
    if file is None or not file.is_file():
        return {}
    data: dict[str, Any] = json.loads(file.read_text("utf-8"))
    size = data.get("size") or {}
    bounds = {"min_pixels": size.get("shortest_edge"), "max_pixels": size.get("longest_edge")}
    return {**{key: value for key, value in bounds.items() if value is not None}, **data}
