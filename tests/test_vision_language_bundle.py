"""A vision-language model's onnxruntime-genai bundle (issue 29, 2): `bundle = ["onnxruntime-genai"]`
writes `genai_config.json` with its vision, embedding and decoder sections, the three files under
the names it gives them, and the runtime's `processor_config.json`.

A tiny seeded Qwen2-VL's three files are exported as the pipeline exports them (its family's
vision, embedding and decoder modules: the vision file one image per call with a dynamic patch
axis), the bundle is rendered by export/'s own code (the builder's decoder section, then
genai_vision.py) and written by bundle_files.py, and onnxruntime-genai 0.18 loads the folder as a
user deploys it: its generator, fed the processor's pixel_values, image_grid_thw and input_ids,
generates transformers' greedy tokens for images at two resolutions, two images in one prompt
and a text-only prompt; its own image processor makes the processor's pixel_values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

STEPS = 8
VOCAB, IMAGE, START, END = 128, 120, 118, 119
PATCH, MERGE, TEMPORAL = 4, 2, 2
WIDTH = 3 * TEMPORAL * PATCH * PATCH  # one patch's values


def tiny_qwen2_vl() -> Any:
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    text = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "eos_token_id": 2, "bos_token_id": 1,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": [2, 1, 1]}}
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2,
              "patch_size": PATCH, "spatial_merge_size": MERGE, "temporal_patch_size": TEMPORAL}
    config = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE,
                           video_token_id=121, vision_start_token_id=START,
                           vision_end_token_id=END)
    return Qwen2VLForConditionalGeneration(config).eval()


def image(grid: tuple[int, int, int], seed: int) -> dict[str, np.ndarray]:
    patches = int(np.prod(grid))
    pixels = np.random.default_rng(seed).standard_normal((patches, WIDTH)).astype(np.float32)
    return {"pixel_values": pixels, "image_grid_thw": np.array([grid], dtype=np.int64)}


def prompt(images: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Text, then each image's tokens between vision start and end, then text."""
    ids = [5, 17]
    for one in images:
        ids += [START] + [IMAGE] * (int(one["image_grid_thw"].prod()) // MERGE**2) + [END]
    return np.array([[*ids, 7, 9, 20]], dtype=np.int64)


# Prompts: one image at each of two resolutions, two images of different sizes, no image.
PROMPTS = {"4x6": [image((1, 4, 6), 1)], "8x4": [image((1, 8, 4), 2)],
           "two": [image((1, 4, 4), 3), image((1, 6, 8), 4)], "text": []}


def _export_vision(model: Any, family: Any, path: Path) -> None:
    import torch

    sample = image((1, 4, 6), 0)
    program = torch.onnx.export(
        family.vision_module(model), (), dynamo=True, verbose=False,
        kwargs={name: torch.from_numpy(value) for name, value in sample.items()},
        dynamic_shapes={"pixel_values": {0: torch.export.Dim("patches", min=4)},
                        "image_grid_thw": None},
        input_names=["pixel_values", "image_grid_thw"], output_names=["image_features"])
    assert program is not None
    program.save(str(path))  # one file, as the pipeline saves a model under 2 GiB


def _export_embedding(model: Any, family: Any, path: Path) -> None:
    import torch

    ids = torch.from_numpy(prompt([image((1, 4, 6), 0)]))
    features = torch.zeros(6, 32)
    torch.onnx.export(
        family.embedding_module(model), (ids, features), str(path), dynamo=False,
        input_names=["input_ids", "image_features"], output_names=["inputs_embeds"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "image_features": {0: "tokens"},
                      "inputs_embeds": {0: "batch", 1: "sequence"}})


def _flat_decoder(model: Any, family: Any) -> Any:
    import torch
    from transformers.cache_utils import DynamicCache

    class Flat(torch.nn.Module):
        """The family's decoder with its cache as flat tensors (optimum's layout)."""

        def __init__(self) -> None:
            super().__init__()
            self.decoder = family.decoder_module(model)

        def forward(self, embeds: Any, mask: Any, positions: Any, *past: Any) -> Any:
            cache = DynamicCache(config=model.config.get_text_config())
            for layer in range(len(past) // 2):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.decoder(embeds, mask, positions, past_key_values=cache)
            presents = [t for layer in out.past_key_values.layers
                        for t in (layer.keys, layer.values)]
            return (out.logits, *presents)

    return Flat()


def _export_decoder(model: Any, family: Any, path: Path) -> tuple[tuple[str, ...], ...]:
    import torch

    layers, batch, length, past = 2, 2, 3, 4
    keys = [f"past_key_values.{layer}.{kind}" for layer in range(layers)
            for kind in ("key", "value")]
    outputs = ["logits", *(name.replace("past_key_values", "present") for name in keys)]
    axes = {"inputs_embeds": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {1: "batch", 2: "sequence"}, "logits": {0: "batch", 1: "sequence"},
            **{name: {0: "batch", 2: "past"} for name in keys},
            **{name: {0: "batch", 2: "total"} for name in outputs[1:]}}
    inputs = ("inputs_embeds", "attention_mask", "position_ids", *keys)
    sample = (torch.randn(batch, length, 32), torch.ones(batch, past + length, dtype=torch.int64),
              torch.arange(past, past + length).expand(3, batch, length).contiguous(),
              *[torch.randn(batch, 2, past, 8) for _ in keys])
    torch.onnx.export(_flat_decoder(model, family), sample, str(path), dynamo=False,
                      input_names=list(inputs), output_names=outputs, dynamic_axes=axes)
    return inputs, tuple(outputs)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three files beside each other as the pipeline writes them, then the bundle folder."""
    from onnx_parity.bundle_files import write_bundle
    from onnx_parity.export.genai_config import genai_config
    from onnx_parity.export.genai_vision import Part, VisionParts, with_vision
    from onnx_parity.generation_results import Bundle
    from onnx_parity.model_files import ModelFile
    from onnx_parity.models.vl_qwen2 import FAMILY

    root = tmp_path_factory.mktemp("vl-bundle")
    model = tiny_qwen2_vl()
    _export_vision(model, FAMILY, root / "tiny.vision.onnx")
    _export_embedding(model, FAMILY, root / "tiny.embedding.onnx")
    names = _export_decoder(model, FAMILY, root / "tiny.onnx")
    parts = VisionParts(Part(("pixel_values", "image_grid_thw"), ("image_features",)),
                        Part(("input_ids", "image_features"), ("inputs_embeds",)))
    document = genai_config(model, None, names, root / "builder", embeds=True)
    documents = with_vision(document, model.config, parts, None)
    return write_bundle(root / "tiny.genai", ModelFile.at(root / "tiny.onnx"),
                        Bundle("onnxruntime-genai", "genai", documents))


def transformers_tokens(images: list[dict[str, np.ndarray]]) -> list[int]:
    """transformers' own greedy `generate` for the prompt and its images."""
    import torch

    ids = torch.from_numpy(prompt(images))
    given: dict[str, Any] = {"attention_mask": torch.ones_like(ids),
                             "mm_token_type_ids": (ids == IMAGE).to(torch.int64)}
    if images:
        given["pixel_values"] = torch.from_numpy(np.concatenate([i["pixel_values"] for i in images]))
        given["image_grid_thw"] = torch.from_numpy(
            np.concatenate([i["image_grid_thw"] for i in images]))
    with torch.no_grad():
        out = tiny_qwen2_vl().generate(ids, do_sample=False, max_new_tokens=STEPS,
                                       eos_token_id=None, **given)
    return [int(token) for token in out[0, ids.shape[1]:]]


def genai_tokens(folder: Path, images: list[dict[str, np.ndarray]]) -> list[int]:
    """The bundle as onnxruntime-genai runs it, fed what the processor returns (its own
    processor returns the same four tensors: input_ids, pixel_values, image_grid_thw and
    num_image_tokens, the features each image makes)."""
    import onnxruntime_genai as og

    ids = prompt(images)
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=ids.shape[1] + STEPS)
    generator = og.Generator(model, params)
    if images:
        inputs = og.NamedTensors()
        inputs["input_ids"] = ids.astype(np.int32)
        inputs["pixel_values"] = np.concatenate([one["pixel_values"] for one in images])
        inputs["image_grid_thw"] = np.concatenate([one["image_grid_thw"] for one in images])
        inputs["num_image_tokens"] = np.array(
            [int(one["image_grid_thw"].prod()) // MERGE**2 for one in images], dtype=np.int64)
        generator.set_inputs(inputs)
    else:
        generator.append_tokens(ids.astype(np.int32))
    tokens: list[int] = []
    while len(tokens) < STEPS and not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


@pytest.mark.slow
def test_the_bundle_holds_the_three_files_under_the_names_its_config_gives(bundle: Path) -> None:
    import onnx

    assert sorted(path.name for path in bundle.iterdir()) == [
        "embedding.onnx", "genai_config.json", "model.onnx", "processor_config.json",
        "vision.onnx"]
    model = json.loads((bundle / "genai_config.json").read_text(encoding="utf-8"))["model"]
    assert model["type"] == "qwen2_5_vl"
    assert (model["image_token_id"], model["vision_start_token_id"]) == (IMAGE, START)
    assert model["vision"]["spatial_merge_size"] == MERGE
    assert model["vision"]["patch_size"] == PATCH
    assert model["vision"]["config_filename"] == "processor_config.json"
    for section in ("vision", "embedding", "decoder"):
        graph = onnx.load(str(bundle / model[section]["filename"]),
                          load_external_data=False).graph
        named = {value for key, value in model[section]["inputs"].items()
                 if not key.endswith("_names")}
        fed = {value.name for value in graph.input if not value.name.startswith("past_")}
        assert named == fed, section
        assert set(model[section]["outputs"].values()) & {value.name for value in graph.output}
    assert "input_ids" not in model["decoder"]["inputs"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_onnxruntime_genai_generates_transformers_tokens_from_the_bundle(
        bundle: Path, name: str) -> None:
    """One image at 4x6 and at 8x4 patches, two images (4x4 and 6x8) in one prompt, and none."""
    expected = transformers_tokens(PROMPTS[name])
    assert len(expected) == STEPS
    assert genai_tokens(bundle, PROMPTS[name]) == expected


@pytest.mark.slow
def test_onnxruntime_genais_processor_makes_the_processors_pixel_values(
        bundle: Path, tmp_path: Path) -> None:
    """Its own image pipeline from processor_config.json on a 24 x 16 PNG (smart-resized up to
    the default min_pixels: 72 x 48, 18 x 12 patches), against transformers' Qwen2-VL image
    processor (measured: within 4.8e-7), and the tokens generated from what it made. The
    processor needs a tokenizer with Qwen's vision tokens, which a user ships beside it."""
    import shutil

    import onnxruntime_genai as og
    from PIL import Image
    from transformers import Qwen2VLImageProcessorPil

    deployed = tmp_path / "deployed"
    shutil.copytree(bundle, deployed)
    _vision_tokenizer(deployed)
    picture = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(5).integers(0, 256, (16, 24, 3), dtype=np.uint8)).save(
        picture)
    processor = og.Model(str(deployed)).create_multimodal_processor()
    made = processor("fr<|vision_start|><|image_pad|><|vision_end|>hju",
                     images=og.Images.open(str(picture)))
    pixels = made["pixel_values"].as_numpy()
    reference = Qwen2VLImageProcessorPil(patch_size=PATCH, merge_size=MERGE,
                                         temporal_patch_size=TEMPORAL)(
        images=[Image.open(picture).convert("RGB")], return_tensors="np")
    assert made["image_grid_thw"].as_numpy().tolist() == reference["image_grid_thw"].tolist()
    assert made["num_image_tokens"].as_numpy().tolist() == [
        int(reference["image_grid_thw"].prod()) // MERGE**2]
    np.testing.assert_allclose(pixels, reference["pixel_values"], atol=1e-5)
    one = {"pixel_values": reference["pixel_values"].astype(np.float32),
           "image_grid_thw": reference["image_grid_thw"].astype(np.int64)}
    assert made["input_ids"].as_numpy().tolist() == prompt([one]).tolist()
    tokens = _generated(og.Model(str(deployed)), made, prompt([one]).shape[1])
    assert tokens == transformers_tokens([one])


def _generated(model: Any, inputs: Any, length: int) -> list[int]:
    """Greedy tokens from inputs the runtime's processor made, as its examples run them."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=length + STEPS)
    generator = og.Generator(model, params)
    generator.set_inputs(inputs)
    tokens: list[int] = []
    while len(tokens) < STEPS and not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def _vision_tokenizer(folder: Path) -> None:
    """A byte-level BPE tokenizer (what onnxruntime-genai's tokenizer reads; it refuses a
    word-level one): the letters a.. as ids 0..99 and Qwen's vision tokens as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = {START: "<|vision_start|>", END: "<|vision_end|>", IMAGE: "<|image_pad|>"}
    words = {special.get(index, chr(ord("a") + index) if index < 100 else f"<x{index}>"): index
             for index in range(VOCAB)}
    tokenizer = Tokenizer(models.BPE(words, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast: Any = PreTrainedTokenizerFast  # transformers' tokenizer classes are untyped
    fast(tokenizer_object=tokenizer,
         additional_special_tokens=list(special.values())).save_pretrained(folder)


def test_an_architecture_without_a_genai_vision_type_is_a_bundle_error() -> None:
    from transformers import LlavaConfig

    from onnx_parity.export.genai_config import BundleError
    from onnx_parity.export.genai_vision import genai_vision_type

    with pytest.raises(BundleError, match=r"no vision-language type for 'llava' \(it runs "):
        genai_vision_type(LlavaConfig())
