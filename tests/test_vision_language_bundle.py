"""A vision-language model's onnxruntime-genai bundle (issue 29): `bundle = ["onnxruntime-genai"]`
writes `genai_config.json` with its vision, embedding and decoder sections, the three files under
the names it gives them, and the runtime's `processor_config.json`; and a planted vision tower
that bakes its patch grid fails at the second resolution.

One CLI run over a repository of two tiny seeded Qwen2-VLs (samples: a 1x4x4 image, a 1x6x6 one
and a text-only prompt, left-padded) is read by every test. onnxruntime-genai 0.18 loads the
`vl.genai/` folder as a user deploys it: its generator, fed the processor's pixel_values,
image_grid_thw and input_ids, generates transformers' greedy tokens for the samples' prompts,
an image at a resolution they lack and two images in one prompt; its own image processor makes
transformers' pixel_values, and the tokens generated from them are transformers' too. The
planted model's vision tower reads its grid's side as `math.isqrt` of its patch count.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_repo.harness import CliRun, left_padded, run_cli, write_model_repo

STEPS = 8
VOCAB, IMAGE, START, END = 128, 120, 118, 119
PATCH, MERGE, TEMPORAL = 4, 2, 2
WIDTH = 3 * TEMPORAL * PATCH * PATCH  # one patch's values


MODELS = """
import math

import torch

TABLE = 32  # the rows and columns the planted tower's position table holds


def config():
    from transformers import Qwen2VLConfig

    text = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "eos_token_id": 2, "bos_token_id": 1,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": [2, 1, 1]}}
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2,
              "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2}
    return Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=120,
                         video_token_id=121, vision_start_token_id=118, vision_end_token_id=119)


def qwen2_vl():
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    return Qwen2VLForConditionalGeneration(config()).eval()


def _grid_patch_embed():
    from transformers.models.qwen2_vl.modeling_qwen2_vl import PatchEmbed

    class GridPatchEmbed(PatchEmbed):
        \"\"\"Qwen2-VL's patch embedding plus a learned row and column embedding of each
        patch, the grid's side read as the square root of the patch count (a square
        image's), not from image_grid_thw.\"\"\"

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.row_table = torch.nn.Parameter(torch.randn(TABLE, self.embed_dim))
            self.column_table = torch.nn.Parameter(torch.randn(TABLE, self.embed_dim))

        def forward(self, hidden_states):
            embedded = super().forward(hidden_states)
            patches = embedded.shape[0]
            side = math.isqrt(patches)
            index = torch.arange(patches, device=embedded.device)
            return embedded + self.row_table[index // side] + self.column_table[index % side]

    return GridPatchEmbed


def planted():
    model = qwen2_vl()
    visual = model.model.visual
    tower = _grid_patch_embed()(patch_size=4, temporal_patch_size=2, in_channels=3,
                                embed_dim=32)
    tower.proj.load_state_dict(visual.patch_embed.proj.state_dict())
    visual.patch_embed = tower
    return model.eval()
"""


def tiny_qwen2_vl() -> Any:
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(MODELS), namespace)
    return namespace["qwen2_vl"]()


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


# The samples' prompts: a 1x4x4 image, a 1x6x6 one (a second side length: see `planted`),
# none. The bundle is run on these and on prompts the samples lack.
SAMPLED: tuple[list[dict[str, np.ndarray]], ...] = (
    [image((1, 4, 4), 1)], [image((1, 6, 6), 2)], [])
PROMPTS = {"4x4": SAMPLED[0], "6x6": SAMPLED[1], "8x4": [image((1, 8, 4), 3)],
           "two": [image((1, 4, 4), 4), image((1, 6, 8), 5)], "text": []}


def vl_samples() -> dict[str, np.ndarray]:
    """Row 0 holds a 1x4x4 image, row 1 a 1x6x6 one, row 2 text only; left-padded (the
    processor's layout: its patches in image order, mm_token_type_ids left for the tool)."""
    rows = [prompt(images)[0].tolist() for images in SAMPLED]
    images = [one for row in SAMPLED for one in row]
    return {**left_padded(rows),
            "pixel_values": np.concatenate([one["pixel_values"] for one in images]),
            "image_grid_thw": np.concatenate([one["image_grid_thw"] for one in images])}


def config() -> str:
    inputs = "".join(f'{name} = "samples/{name}.npy"\n' for name in (
        "input_ids", "attention_mask", "pixel_values", "image_grid_thw"))
    entry = ('[[model]]\nname = "{name}"\nfactory = "models.vlm:{factory}"\n'
             'generate = {{ steps = ' + str(STEPS) + '{bundle} }}\n\n[model.inputs]\n' + inputs)
    return "batch-sizes = [3]\n" + "".join(
        entry.format(name=name, factory=factory, bundle=bundle) for name, factory, bundle in (
            ("vl", "qwen2_vl", ', bundle = ["onnxruntime-genai"], runtime = "onnxruntime-genai"'),
            ("planted", "planted", "")))


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[CliRun, Path]:
    """One CLI run of the tiny Qwen2-VL with its bundle and the planted tower."""
    root = tmp_path_factory.mktemp("vl-bundle")
    repo = write_model_repo(root, ("vlm", MODELS), vl_samples(), config())
    run = run_cli("check", "--cache", str(root / "cache"), cwd=repo, out=root / "out",
                  timeout=1200)
    assert run.code in (0, 1), run.stdout + run.stderr
    return run, repo


@pytest.fixture(scope="module")
def bundle(checked: tuple[CliRun, Path]) -> Path:
    run, _ = checked
    model = run.models()["vl"]
    assert model["passed"], model["findings"]
    return run.folder / "vl.genai"


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
    """The samples' prompts (a 1x4x4 image, a 1x6x6 one, none), an 8x4 image they lack, and two
    images of different sizes (4x4 and 6x8) in one prompt."""
    expected = transformers_tokens(PROMPTS[name])
    assert len(expected) == STEPS
    assert genai_tokens(bundle, PROMPTS[name]) == expected


@pytest.mark.slow
def test_the_check_ran_each_prompt_with_its_images_in_onnxruntime_genais_own_loop(
        checked: tuple[CliRun, Path]) -> None:
    """`runtime = "onnxruntime-genai"`: each prompt row, unpadded, with its own image, through
    genai's Generator from the bundle, against the model's own generate on the same inputs."""
    run, _ = checked
    runtime = run.models()["vl"]["generation"]["runtime"]
    assert runtime == {"runtime": "onnxruntime-genai", "steps": STEPS,
                       "tokens_agree": [STEPS] * 3, "compared": [STEPS] * 3,
                       "first_token_difference": None}


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


@pytest.mark.slow
def test_a_vision_tower_that_bakes_its_patch_grid_fails_at_the_second_resolution(
        checked: tuple[CliRun, Path]) -> None:
    """The planted tower reads its grid's side as isqrt(patches): exported from the 1x4x4
    image, the file keeps side 4, right at 16 patches (and 24: isqrt(24) = 4), wrong at 36.
    dynamo refuses the dynamic patch axis (isqrt specialises it to 16: with Dim.AUTO it would
    export silently wrong), TorchScript exports it without a warning and keeps no source line:
    the finding says so, with dynamo's refusal."""
    run, _ = checked
    model = run.models()["planted"]
    assert not model["passed"]
    vision = [f for f in model["findings"] if f["severity"] == "error"
              and "vision file planted.vision.onnx" in f["message"]]
    assert vision, model["findings"]
    message = vision[0]["message"]
    assert "at resolution 1x6x6 (t x h x w)" in message
    checks = model["generation"]["pipeline"]["checks"]
    assert [(c["case"], c["passed"]) for c in checks if c["file"] == "vision"] == [
        ("1x4x4", True), ("1x6x6", False), ("1x8x6", False)]
    assert "a TorchScript graph records no source line" in message, message
    assert "inferred a static shape of 16 for dimension inputs['pixel_values']" in message
    exports = [f for f in model["findings"] if f["code"] == "exporter-fallback"]
    assert exports, model["findings"]
    print("planted:", message)


@pytest.mark.slow
def test_the_planted_towers_repro_folder_runs_its_vision_file_alone(
        checked: tuple[CliRun, Path]) -> None:
    """No node is named in a TorchScript graph, so the folder holds the whole vision file as
    its subgraph, fed the failing 1x6x6 call's pixels: repro.py, run with only numpy and
    onnxruntime, prints the difference the check measured."""
    from test_repro import printed_diff, run_repro

    run, _ = checked
    repro = run.models()["planted"]["repro"]
    assert repro is not None
    assert repro["found_by"] == "file-call"
    assert repro["reproduces"] is True, repro
    folder = run.folder / "planted.repro"
    assert {"REPORT.md", "repro.py", "subgraph.onnx", "inputs.npz", "expected.npz"} <= {
        path.name for path in folder.iterdir()}
    with np.load(folder / "inputs.npz") as inputs:
        assert [array.shape for array in inputs.values()][0][0] == 36  # the 1x6x6 grid's patches
    report = (folder / "REPORT.md").read_text(encoding="utf-8")
    assert "the whole file" in report
    assert "The vision file of the model `planted` (`planted.vision.onnx`)" in report
    done = run_repro(folder / "repro.py", run.folder.parent)
    assert done.returncode == 1, done.stdout + done.stderr  # it reproduces: outside the tolerance
    assert printed_diff(done.stdout) == pytest.approx(repro["max_abs_diff"], rel=1e-3)
    assert repro["max_abs_diff"] > 0.1


def test_an_architecture_without_a_genai_vision_type_is_a_bundle_error() -> None:
    from transformers import LlavaConfig

    from onnx_parity.export.genai_config import BundleError
    from onnx_parity.export.genai_vision import genai_vision_type

    with pytest.raises(BundleError, match=r"no vision-language type for 'llava' \(it runs "):
        genai_vision_type(LlavaConfig())


def test_a_decoder_input_genai_does_not_feed_is_a_bundle_error() -> None:
    """Gemma 3's decoder file takes token_type_ids; genai's gemma3 type feeds it none."""
    from transformers import Gemma3Config

    from onnx_parity.export.genai_config import BundleError
    from onnx_parity.export.genai_vision import Part, VisionParts, with_vision

    parts = VisionParts(Part(("pixel_values",), ("image_features",)),
                        Part(("input_ids", "image_features"), ("inputs_embeds",)))
    inputs = ("inputs_embeds", "attention_mask", "position_ids", "token_type_ids",
              "past_key_values.0.key")
    with pytest.raises(BundleError, match="takes token_type_ids, which onnxruntime-genai's "
                                          "gemma3 does not feed it"):
        with_vision({"model": {}}, Gemma3Config(), parts, None, inputs)


@pytest.mark.slow
def test_a_cached_model_writes_the_same_bundle_with_its_three_files(
        checked: tuple[CliRun, Path], tmp_path: Path) -> None:
    """A second run takes both models from the cache: the bundle folder comes back from the
    cached documents, the vision and embedding files with the decoder."""
    first, repo = checked
    cache = first.folder.parent / "cache"
    again = run_cli("check", "--cache", str(cache), cwd=repo, out=tmp_path / "out", timeout=600)
    assert again.code == first.code, again.stdout + again.stderr
    assert all(model.get("cached") for model in again.models().values()), again.stdout
    folder, before = again.folder / "vl.genai", first.folder / "vl.genai"
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        path.name for path in before.iterdir())
    for path in before.iterdir():
        assert (folder / path.name).read_bytes() == path.read_bytes(), path.name
