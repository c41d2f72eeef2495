"""Vision-language models checked as the pipelines they ship as (issue 29): a tiny Qwen2-VL
(seeded random weights, no download) through the real CLI, its three files exported and each
checked, then greedy decoding through them.

The samples hold images at two resolutions (grids 1x4x4 and 1x4x6: 4 and 6 image tokens) and a
text-only row, left-padded to one length; `mm_token_type_ids` is left out so the tool derives
it. One CLI run of the passing model is read by several tests; the failing case plants a wrong
vision wrapper (the grid's height taken for its width) that agrees on a square grid only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_repo.harness import left_padded, run_cli, write_model_repo

MODELS = '''
import torch

IMAGE, START, END = 120, 118, 119


def config():
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(
        text_config=dict(vocab_size=128, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, eos_token_id=None, bos_token_id=None,
                         rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3],
                                          "rope_theta": 10000.0}),
        vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, patch_size=4,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=IMAGE, video_token_id=121, vision_start_token_id=START,
        vision_end_token_id=END)


def qwen2_vl():
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    return Qwen2VLForConditionalGeneration(config()).eval()
'''

STEPS = 8
GRIDS = ((1, 4, 4), (1, 4, 6))  # 4 and 6 image tokens (spatial merge 2)
PATCH = 3 * 2 * 4 * 4  # channels * temporal patch * patch * patch


def vl_samples() -> dict[str, np.ndarray]:
    """Row 0 holds the 1x4x4 image, row 1 the 1x4x6 one, row 2 text only; left-padded."""
    rng = np.random.default_rng(0)
    rows = []
    for grid in GRIDS:
        tokens = int(np.prod(grid)) // 4
        rows.append([5, 6, 118, *[120] * tokens, 119, 7, 8, 9])
    rows.append([10, 11, 12, 13, 14])
    pixels = rng.standard_normal((sum(int(np.prod(g)) for g in GRIDS), PATCH)).astype(np.float32)
    return {**left_padded(rows), "pixel_values": pixels,
            "image_grid_thw": np.array(GRIDS, dtype=np.int64)}


CONFIG = f'''batch-sizes = [3]
[[model]]
name = "vl"
factory = "models.vlm:qwen2_vl"
generate = {{ steps = {STEPS} }}

[model.inputs]
input_ids = "samples/input_ids.npy"
attention_mask = "samples/attention_mask.npy"
pixel_values = "samples/pixel_values.npy"
image_grid_thw = "samples/image_grid_thw.npy"
'''


def checked(root: Path, models: str = MODELS, config: str = CONFIG) -> tuple[Any, dict]:
    repo = write_model_repo(root, ("vlm", models), vl_samples(), config)
    run = run_cli("check", "--jobs", "1", cwd=repo, out=root / "out")
    assert run.code in (0, 1), run.stdout + run.stderr
    [result] = run.report()["models"]
    return run, result


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict, Path]:
    root = tmp_path_factory.mktemp("qwen2_vl")
    run, result = checked(root)
    return run, result, root / "out"


def errors(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


@pytest.mark.slow
def test_a_tiny_qwen2_vl_generates_the_same_tokens_through_its_three_files(
        passing: tuple[Any, dict, Path]) -> None:
    run, result, _ = passing
    assert run.code == 0, errors(result)
    generation = result["generation"]
    assert generation["rows"] == 3
    assert generation["tokens_agree"] == [STEPS] * 3
    assert max(generation["max_logit_diff"]) < 1e-4
    print("max logit diff per step:", generation["max_logit_diff"])


@pytest.mark.slow
def test_the_vision_file_is_checked_at_each_resolution_and_an_unseen_one(
        passing: tuple[Any, dict, Path]) -> None:
    _, result, _ = passing
    pipeline = result["generation"]["pipeline"]
    vision = [check for check in pipeline["checks"] if check["file"] == "vision"]
    assert [(c["case"], c["seen"]) for c in vision] == [
        ("1x4x4", True), ("1x4x6", True), ("1x6x6", False)]
    assert all(c["passed"] and c["max_abs_diff"] < 1e-5 for c in vision), vision
    assert [c["shape"] for c in vision] == [[4, 64], [6, 64], [9, 64]]
    print("vision:", [(c["case"], c["max_abs_diff"]) for c in vision])


@pytest.mark.slow
def test_the_embedding_file_is_checked_with_one_two_and_no_images(
        passing: tuple[Any, dict, Path]) -> None:
    _, result, _ = passing
    pipeline = result["generation"]["pipeline"]
    embedding = [check for check in pipeline["checks"] if check["file"] == "embedding"]
    assert [c["case"] for c in embedding] == ["one image", "two images", "no image"]
    assert all(c["passed"] and c["max_abs_diff"] < 1e-6 for c in embedding), embedding
    print("embedding:", [(c["case"], c["max_abs_diff"]) for c in embedding])


@pytest.mark.slow
def test_the_derived_token_types_and_the_positions_are_said(
        passing: tuple[Any, dict, Path]) -> None:
    _, result, _ = passing
    pipeline = result["generation"]["pipeline"]
    assert pipeline["family"] == "qwen2-vl"
    [derived] = pipeline["derived"]
    assert derived.startswith("mm_token_type_ids: derived from the image token 120")
    assert pipeline["positions"].startswith("3-D (3, batch, sequence)")


@pytest.mark.slow
def test_the_three_files_are_published_with_every_image_axis_dynamic(
        passing: tuple[Any, dict, Path]) -> None:
    import onnx

    _, result, out = passing
    names = sorted(path.name for path in out.glob("vl*.onnx"))
    assert names == ["vl.embedding.onnx", "vl.onnx", "vl.vision.onnx"]
    layouts = {}
    for name in names:
        graph = onnx.load(str(out / name), load_external_data=False).graph
        layouts[name] = {value.name: [d.dim_param or d.dim_value
                                      for d in value.type.tensor_type.shape.dim]
                         for value in [*graph.input, *graph.output]}
    vision = layouts["vl.vision.onnx"]
    assert isinstance(vision["pixel_values"][0], str)
    assert vision["pixel_values"][1] == PATCH
    assert vision["image_grid_thw"] == [1, 3]
    assert isinstance(vision["image_features"][0], str)
    embedding = layouts["vl.embedding.onnx"]
    assert all(isinstance(axis, str) for axis in embedding["input_ids"])
    assert isinstance(embedding["image_features"][0], str)
    decoder = layouts["vl.onnx"]
    assert decoder["position_ids"][0] == 3
    assert isinstance(decoder["position_ids"][1], str)
    assert "inputs_embeds" in decoder
    assert "input_ids" not in decoder
    assert json.dumps(result["generation"]["pipeline"]["files"]) == json.dumps(
        ["vl.vision.onnx", "vl.embedding.onnx", "vl.onnx"])


@pytest.mark.slow
def test_the_generation_row_names_the_files_and_the_resolutions(
        passing: tuple[Any, dict, Path]) -> None:
    _, _, out = passing
    summary = (out / "report.md").read_text(encoding="utf-8")
    assert f"vision 3 resolutions, embedding, decoder: tokens agree {STEPS}/{STEPS}" in summary
    assert "; `mm_token_type_ids` derived (not in the samples: report.json says how)" in summary


# ---- a planted wrong vision wrapper ----

WRONG = MODELS + '''

def height_for_width():
    """The vision wrapper's rotary positions laid out with the grid's height taken for its
    width: right on a square grid (the 1x4x4 image it is exported from), wrong on 1x4x6."""
    from onnx_parity.models.vision_language import qwen2 as vl_qwen2

    original = vl_qwen2._patch_positions

    def swapped(torch, patches, grid, merge):
        return original(torch, patches, grid[:, [0, 2, 1]], merge)

    vl_qwen2._patch_positions = swapped
    return qwen2_vl()
'''


@pytest.mark.slow
def test_a_wrong_vision_file_is_named_with_its_resolution(tmp_path: Path) -> None:
    config = CONFIG.replace("models.vlm:qwen2_vl", "models.vlm:height_for_width")
    run, result = checked(tmp_path, WRONG, config)
    assert run.code == 1
    vision = [f for f in errors(result) if "vision file vl.vision.onnx" in f[1]]
    assert vision, errors(result)
    code, message = vision[0]
    assert code == "parity-mismatch"
    assert "at resolution 1x4x6 (t x h x w)" in message
    checks = result["generation"]["pipeline"]["checks"]
    assert [(c["case"], c["passed"]) for c in checks if c["file"] == "vision"] == [
        ("1x4x4", True), ("1x4x6", False), ("1x6x6", True)]
    # The file computes what the wrapper it was exported from computes: the wrapper is named.
    assert "the family's vision wrapper, computes otherwise" in message
    # The decoding differs downstream of the vision file, which is not the decoder's to blame.
    assert result.get("divergence") is None
    decoding = [message for _, message in errors(result) if "generation step 0" in message]
    assert decoding
    assert all(message.startswith("decoding through the decoder file vl.onnx (fed by the "
                                  "vision and embedding files, which differ already)")
               for message in decoding)
    print("wrong vision:", message)


# ---- bad inputs ----

@pytest.mark.slow
def test_image_tokens_that_do_not_match_the_images_are_a_load_error(tmp_path: Path) -> None:
    samples = vl_samples()
    samples["image_grid_thw"] = np.array([[1, 4, 4], [1, 4, 4]], dtype=np.int64)
    samples["pixel_values"] = samples["pixel_values"][:32]
    repo = write_model_repo(tmp_path, ("vlm", MODELS), samples, CONFIG)
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    [finding] = [f for f in result["findings"] if f["code"] == "load-error"]
    assert "input_ids holds 10 image token(s)" in finding["message"]
    assert "image_grid_thw = image_grid_thw.npy" in finding["message"]
    assert "processor" in finding["fix"]


QWEN25 = MODELS + '''

def qwen2_5_vl():
    """An architecture no family takes (yet): Qwen2.5-VL's window attention."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(0)
    text = config().text_config.to_dict()
    vision = dict(depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64,
                  num_heads=2, patch_size=4, spatial_merge_size=2, temporal_patch_size=2,
                  window_size=16, fullatt_block_indexes=[1])
    return Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, image_token_id=IMAGE, video_token_id=121,
        vision_start_token_id=START, vision_end_token_id=END)).eval()
'''


@pytest.mark.slow
def test_a_vision_language_architecture_no_family_takes_is_named(tmp_path: Path) -> None:
    """Image inputs on a VLM this version has no family for: a load-error naming its
    architecture and the ones it exports, with the text-only fix (not the encoder-decoder
    message a decoder's extra inputs get)."""
    repo = write_model_repo(tmp_path, ("vlm", QWEN25), vl_samples(),
                            CONFIG.replace("models.vlm:qwen2_vl", "models.vlm:qwen2_5_vl"))
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    [finding] = [f for f in result["findings"] if f["code"] == "load-error"]
    assert "its architecture (qwen2_5_vl) is not one this version exports" in finding["message"]
    assert "qwen2-vl, llava, idefics3, gemma3" in finding["message"]
    assert "encoder-decoder" not in finding["message"]
    assert "prompts only" in finding["fix"]
    assert not result["passed"]  # never its images silently left out

# ---- the family's pieces, in process ----

@pytest.fixture(scope="module")
def model() -> Any:
    namespace: dict[str, Any] = {}
    exec(MODELS, namespace)  # the source the tests' repositories hold
    return namespace["qwen2_vl"]()


def test_patch_positions_are_those_of_transformers() -> None:
    import torch
    from transformers.vision_utils import get_vision_position_ids

    from onnx_parity.models.vision_language.qwen2 import _patch_positions

    for grid in ((1, 4, 4), (1, 4, 6), (1, 8, 2), (2, 4, 6)):
        given = torch.tensor([grid])
        ours = _patch_positions(torch, int(np.prod(grid)), given, 2)
        assert torch.equal(ours, get_vision_position_ids(given, 2)), grid


def test_each_row_gets_its_own_images(model: Any) -> None:
    from onnx_parity.models.vision_language.qwen2 import FAMILY

    samples = vl_samples()
    contract = FAMILY.contract(model, None)  # type: ignore[arg-type]
    prompts, derived = FAMILY.derive(model, samples, contract)
    assert [item.name for item in derived] == ["mm_token_type_ids"]
    second = FAMILY.rows(model, prompts, slice(1, 3))
    assert second["image_grid_thw"].tolist() == [[1, 4, 6]]
    assert len(second["pixel_values"]) == 24
    assert "pixel_values" not in FAMILY.rows(model, prompts, slice(2, 3))


def test_an_input_the_architecture_does_not_take_is_named(model: Any) -> None:
    from onnx_parity.models import LoadError
    from onnx_parity.models.vision_language.qwen2 import FAMILY

    samples = {**vl_samples(), "image_sizes": np.zeros((2, 2), dtype=np.int64)}
    with pytest.raises(LoadError, match="gives image_sizes, which Qwen2-VL does not take"):
        FAMILY.derive(model, samples, FAMILY.contract(model, None))  # type: ignore[arg-type]


def test_prompt_positions_are_the_rope_index_and_steps_add_one(model: Any) -> None:
    from onnx_parity.models.vision_language.qwen2 import FAMILY

    prompts, _ = FAMILY.derive(model, vl_samples(), FAMILY.contract(model, None))  # type: ignore[arg-type]
    positions = FAMILY.prompt_positions(model, prompts)
    assert positions.shape == (3, 3, 13)
    # row 0 (2 padded): 3 text tokens, its 2x2 merged image at 3 (t 3; h 3, 3, 4, 4; w 3, 4,
    # 3, 4), the text after it from 3 + max(2, 2)
    assert positions[:, 0, 2:].tolist() == [[0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 8],
                                            [0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 8],
                                            [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8]]
    assert positions[:, 2, -5:].tolist() == [[0, 1, 2, 3, 4]] * 3  # text only: 1-D
    # row 1's 2x3 image moves its text on by 3: each row's next position is its last plus one
    assert FAMILY.step_positions(positions)[:, :, 0].tolist() == [[9, 10, 5]] * 3


@pytest.mark.slow
def test_a_checkpoint_folder_is_declared_with_transformers(tmp_path: Path) -> None:
    """`transformers = "checkpoints/tiny-qwen2-vl"`: the class config.json names, offline;
    mm_token_type_ids given this time (nothing derived), the default batch sizes (rows cut
    into smaller chunks, each with its own images)."""
    namespace: dict[str, Any] = {}
    exec(MODELS, namespace)  # the source the tests' repositories hold
    samples = vl_samples()
    samples["mm_token_type_ids"] = (samples["input_ids"] == 120).astype(np.int64)
    config = CONFIG.replace("batch-sizes = [3]\n", "").replace(  # the default batch sizes
        'factory = "models.vlm:qwen2_vl"', 'transformers = "checkpoints/tiny-qwen2-vl"').replace(
        'image_grid_thw = "samples/image_grid_thw.npy"\n',
        'image_grid_thw = "samples/image_grid_thw.npy"\n'
        'mm_token_type_ids = "samples/mm_token_type_ids.npy"\n')
    repo = write_model_repo(tmp_path, ("vlm", MODELS), samples, config)
    namespace["qwen2_vl"]().save_pretrained(repo / "checkpoints" / "tiny-qwen2-vl")
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    assert run.code == 0, errors(result)
    assert result["generation"]["tokens_agree"] == [STEPS] * 3
    assert result["generation"]["pipeline"]["derived"] == []


@pytest.mark.slow
def test_a_text_only_entry_exports_the_vision_file_from_an_example_image(
        tmp_path: Path) -> None:
    """A second [[model]] entry of the same model with prompts and no images: the vision file
    is exported from the family's example image (1x4x4) and checked there and at an unseen
    size; the embedding file with those images' features and without."""
    samples = vl_samples()
    text = {"input_ids": samples["input_ids"][2:], "attention_mask": samples["attention_mask"][2:]}
    config = CONFIG.split("pixel_values")[0].replace("batch-sizes = [3]", "batch-sizes = [1]")
    config = config.replace('name = "vl"\n', 'name = "vl"\nvariants = ["fp16"]\n')
    repo = write_model_repo(tmp_path, ("vlm", MODELS), text, config)
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    assert run.code == 0, errors(result)
    pipeline = result["generation"]["pipeline"]
    assert [(c["file"], c["case"], c["seen"]) for c in pipeline["checks"]] == [
        ("vision", "1x4x4", True), ("vision", "1x6x4", False), ("embedding", "one image", True),
        ("embedding", "two images", True), ("embedding", "no image", True)]
    assert all(c["passed"] for c in pipeline["checks"])
    assert result["generation"]["tokens_agree"] == [STEPS]
    assert pipeline["derived"][0].startswith("mm_token_type_ids")
    [variant] = result["variants"]  # asked for, and said not to be built
    assert variant["skipped"].startswith("variants of a vision-language model's files are not")


def test_an_input_no_processor_returns_is_a_config_error(tmp_path: Path) -> None:
    config = CONFIG.replace('image_grid_thw = "samples/image_grid_thw.npy"',
                            'image_grid = "samples/image_grid_thw.npy"')
    repo = write_model_repo(tmp_path, ("vlm", MODELS), vl_samples(), config)
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 2, run.stdout + run.stderr
    assert '"image_grid"' in run.stderr + run.stdout
    assert "image_grid_thw" in run.stderr + run.stdout  # the names it takes
