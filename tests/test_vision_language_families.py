"""The vision-language families other than Qwen (issue 29): LLaVA, Idefics3 and Gemma 3.

The families' own members first, in PyTorch on both sides: each wrapper against the model's own
code, and the three parts chained (vision per image, embedding, decoder with its cache) against
the model's greedy `generate`, tokens and logits: the split must reproduce the model. Then the
real CLI on one repository holding the three models.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from onnx_parity.models.generating.base import CacheShape
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_language.registry import family_of
from vl_family_models import IMAGE, SAMPLES, SOURCE, llava_full_samples

torch = pytest.importorskip("torch")
STEPS = 8
FAMILIES = ("llava", "idefics3", "gemma3")


@pytest.fixture(scope="module")
def factories() -> types.ModuleType:
    module = types.ModuleType("vlm")
    exec(compile(SOURCE, "vlm.py", "exec"), module.__dict__)  # the CLI test's models/vlm.py
    return module


@pytest.fixture(scope="module")
def built(factories: types.ModuleType) -> dict[str, Any]:
    return {name: getattr(factories, name)() for name in FAMILIES}


def contract_of(name: str, model: Any) -> Any:
    family = family_of(model)
    assert family is not None
    assert family.name == name
    text = model.config.get_text_config()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    cache = CacheShape(text.num_hidden_layers, text.num_key_value_heads, head_dim, True)
    return family, family.contract(model, cache)


def tensors(values: dict[str, np.ndarray]) -> dict[str, Any]:
    return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in values.items()}


def generated(model: Any, samples: dict[str, np.ndarray]) -> tuple[Any, Any]:
    """The model's own greedy decoding: STEPS tokens and their logits."""
    with torch.no_grad():
        out = model.generate(**tensors(samples), max_new_tokens=STEPS, min_new_tokens=STEPS,
                             do_sample=False, output_logits=True, return_dict_in_generate=True)
    return out.sequences[:, samples["input_ids"].shape[1]:], torch.stack(out.logits, 1)


def chained(family: Any, contract: Any, model: Any, samples: dict[str, np.ndarray]
            ) -> tuple[Any, Any]:
    """The three wrappers chained as the exported files run: each image through the vision
    module, the embedding, then the decoder with its cache, one token at a time."""
    from onnx_parity.models.call_arguments import dynamic_cache

    vision, embedding = family.vision_module(model), family.embedding_module(model)
    decoder = family.decoder_module(model)
    hidden = contract.hidden_size
    with torch.no_grad():
        features = [vision(**tensors(image)) for image in family.images(samples)]
        feats = torch.cat(features) if features else torch.zeros((0, hidden))
        ids, mask = tensors(samples)["input_ids"], tensors(samples)["attention_mask"]
        positions = family.prompt_positions(model, samples)
        extra = {name: tensors(samples)[name] for name in contract.decoder_extra}
        layers = contract.cache.layers
        cache = dynamic_cache({f"{layer}.{part}": torch.zeros(
            (len(ids), contract.cache.kv_heads, 0, contract.cache.head_dim))
            for layer in range(layers) for part in ("key", "value")}, model.config)
        embeds = embedding(ids, feats)
        tokens, logits = [], []
        for step in range(STEPS):
            out = decoder(embeds, mask, torch.from_numpy(positions), **extra,
                          past_key_values=cache, use_cache=True)
            logits.append(out.logits[:, -1])
            tokens.append(out.logits[:, -1].argmax(-1))
            cache, positions = out.past_key_values, family.step_positions(positions)
            mask = torch.cat([mask, torch.ones((len(ids), 1), dtype=mask.dtype)], 1)
            embeds = embedding(tokens[-1][:, None], torch.zeros((0, hidden)))
            extra = {name: torch.zeros((len(ids), 1), dtype=torch.int64)
                     for name in contract.decoder_extra}
            del step
    return torch.stack(tokens, 1), torch.stack(logits, 1)


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_is_recognised_and_reads_its_samples(name: str, built: dict) -> None:
    family, contract = contract_of(name, built[name])
    samples, derived = family.derive(built[name], SAMPLES[name](), contract)
    assert family.name == name
    assert contract.image_token == IMAGE
    assert not contract.positions_3d
    assert not derived
    held = int((samples["input_ids"] == IMAGE).sum())
    features = sum(len(family.image_features(built[name], image))
                   for image in family.images(samples))
    assert held == features  # every image token gets one feature, from the model's own code


@pytest.mark.parametrize("name", FAMILIES)
def test_the_vision_and_embedding_wrappers_are_the_models_own_code(name: str,
                                                                   built: dict) -> None:
    model = built[name]
    family, _contract = contract_of(name, model)
    samples = SAMPLES[name]()
    vision, embedding = family.vision_module(model), family.embedding_module(model)
    own = [family.image_features(model, image) for image in family.images(samples)]
    with torch.no_grad():
        wrapped = [vision(**tensors(image)).numpy() for image in family.images(samples)]
        for rows in (slice(0, 1), slice(1, 2), slice(2, 3)):  # one image, two (tiles), none
            ids = samples["input_ids"][rows]
            before = int((samples["input_ids"][:rows.start] == IMAGE).sum())
            count = int((ids == IMAGE).sum())
            feats = np.concatenate(own)[before:before + count]
            merged = embedding(torch.from_numpy(ids), torch.from_numpy(feats)).numpy()
            assert np.array_equal(merged, family.merged_embeddings(model, ids, feats))
    assert len(own) >= 2
    assert all(np.array_equal(a, b) for a, b in zip(own, wrapped, strict=True))
    assert all(np.abs(a).max() > 0.1 for a in own)  # features that can differ


@pytest.mark.parametrize("name", FAMILIES)
def test_the_three_parts_chained_reproduce_the_models_generation(name: str,
                                                                 built: dict) -> None:
    model = built[name]
    family, contract = contract_of(name, model)
    samples, _ = family.derive(model, SAMPLES[name](), contract)
    tokens, logits = generated(model, samples)
    split_tokens, split_logits = chained(family, contract, model, samples)
    assert torch.equal(tokens, split_tokens)
    assert float((logits - split_logits).abs().max()) < 1e-5


def test_smolvlm_is_read_by_the_idefics3_family(factories: types.ModuleType) -> None:
    model = factories.smolvlm()
    family, contract = contract_of("idefics3", model)
    samples, _ = family.derive(model, SAMPLES["idefics3"](), contract)
    vision = family.vision_module(model)
    with torch.no_grad():
        assert all(np.array_equal(family.image_features(model, image),
                                  vision(**tensors(image)).numpy())
                   for image in family.images(samples))
    tokens, logits = generated(model, samples)
    split_tokens, split_logits = chained(family, contract, model, samples)
    assert torch.equal(tokens, split_tokens)
    assert float((logits - split_logits).abs().max()) < 1e-5


def test_gemma3s_image_tokens_attend_both_ways_only_through_token_type_ids(built: dict) -> None:
    model = built["gemma3"]
    family, contract = contract_of("gemma3", model)
    given = SAMPLES["gemma3"]()
    without = {name: value for name, value in given.items() if name != "token_type_ids"}
    samples, derived = family.derive(model, without, contract)
    assert [item.name for item in derived] == ["token_type_ids"]
    assert np.array_equal(samples["token_type_ids"], given["token_type_ids"])
    _, logits = generated(model, samples)
    causal = dict(samples, token_type_ids=np.zeros_like(samples["token_type_ids"]))
    _, causal_logits = chained(family, contract, model, causal)
    assert float((logits[:2, 0] - causal_logits[:2, 0]).abs().max()) > 1e-3
    assert contract.decoder_inputs[3] == "token_type_ids"


def test_llava_with_the_class_token_and_two_feature_layers(factories: types.ModuleType) -> None:
    model = factories.llava(strategy="full", layer=[-2, -1])
    family, contract = contract_of("llava", model)
    samples, _ = family.derive(model, llava_full_samples(), contract)
    vision = family.vision_module(model)
    with torch.no_grad():
        features = [vision(**tensors(image)).numpy() for image in family.images(samples)]
    assert [len(item) for item in features] == [17, 17, 17]
    assert all(np.array_equal(item, family.image_features(model, image))
               for item, image in zip(features, family.images(samples), strict=True))
    tokens, logits = generated(model, samples)
    split_tokens, split_logits = chained(family, contract, model, samples)
    assert torch.equal(tokens, split_tokens)
    assert float((logits - split_logits).abs().max()) < 1e-5


def test_an_image_token_outside_the_vocabulary_is_embedded_as_the_model_does(
        factories: types.ModuleType) -> None:
    model = factories.gemma3(vocab_size=IMAGE)  # the image token is the first id past it
    family, contract = contract_of("gemma3", model)
    samples, _ = family.derive(model, SAMPLES["gemma3"](), contract)
    embedding = family.embedding_module(model)
    with torch.no_grad():
        for ids in (samples["input_ids"], samples["input_ids"][2:]):  # features, and none
            count = int((ids == IMAGE).sum())
            feats = np.random.default_rng(0).standard_normal((count, 32)).astype(np.float32)
            merged = embedding(torch.from_numpy(ids), torch.from_numpy(feats)).numpy()
            assert np.array_equal(merged, family.merged_embeddings(model, ids, feats))
    tokens, logits = generated(model, samples)
    split_tokens, split_logits = chained(family, contract, model, samples)
    assert torch.equal(tokens, split_tokens)
    assert float((logits - split_logits).abs().max()) < 1e-5


def test_idefics3s_images_are_its_prompts_tiles_and_an_unseen_count_is_made(
        built: dict) -> None:
    model = built["idefics3"]
    family, contract = contract_of("idefics3", model)
    samples = SAMPLES["idefics3"]()
    images = family.images(samples)
    assert [image["pixel_values"].shape[1] for image in images] == [5, 1]
    unseen = family.unseen_image(model, images)
    assert unseen is not None
    assert unseen["pixel_values"].shape[1] == 6
    assert len(family.image_features(model, unseen)) == 6 * 4
    example = family.example_image(model)
    assert len(family.image_features(model, example)) == 4  # one tile, for text-only prompts
    assert contract.dynamic_resolution
    assert "pixel_values" not in family.rows(model, samples, slice(2, 3))
    no_mask = {name: value for name, value in samples.items() if name != "pixel_attention_mask"}
    completed, derived = family.derive(model, no_mask, contract)
    assert np.array_equal(completed["pixel_attention_mask"], samples["pixel_attention_mask"])
    assert derived[0].name == "pixel_attention_mask"


@pytest.mark.parametrize("name", FAMILIES)
def test_image_tokens_that_do_not_match_the_images_name_the_inputs(name: str,
                                                                   built: dict) -> None:
    family, contract = contract_of(name, built[name])
    samples = SAMPLES[name]()
    samples["input_ids"] = np.where(samples["input_ids"] == IMAGE, 5, samples["input_ids"])
    with pytest.raises(LoadError, match="input_ids holds 0 image token"):
        family.derive(built[name], samples, contract)
    with pytest.raises(LoadError, match="does not take"):
        family.derive(built[name], {**SAMPLES[name](), "image_sizes": np.ones(2)}, contract)


def test_a_tower_pytorch_cannot_run_on_the_image_is_the_models_failure_not_a_crash() -> None:
    """Gemma 3 pooling a 4x4 patch grid to 25 tokens: avg_pool2d gets a kernel of 0 in
    PyTorch ("stride should not be zero"); the pipeline says so as the model's failure."""
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    from onnx_parity.models.reference import ReferenceFailure
    from onnx_parity.pipeline.generating.vl_generating import _image_features

    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(Gemma3Config(
        vision_config=SiglipVisionConfig(hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         image_size=32, patch_size=8),
        text_config=Gemma3TextConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=1, head_dim=16),
        mm_tokens_per_image=25, image_token_index=IMAGE)).eval()
    family = family_of(model)
    assert family is not None
    with pytest.raises(ReferenceFailure, match=r"RuntimeError: stride should not be zero "
                       r"\(get_image_features of gemma3's example image, shape \[1, 3, 32, 32\]"):
        _image_features(family, model, family.example_image(model), False)


# ---- the real CLI: the three models in one repository, one run ----

CLI_STEPS = 8
TEXT = ("input_ids", "attention_mask")


def cli_config() -> str:
    """Each family twice: its samples with images, and `<name>-text`, prompts only."""
    entries = []
    for name in FAMILIES:
        for entry, keys in ((name, tuple(SAMPLES[name]())), (f"{name}-text", TEXT)):
            inputs = "\n".join(f'{key} = "samples/{entry}_{key}.npy"' for key in keys)
            entries.append(f'[[model]]\nname = "{entry}"\nfactory = "models.vlm:{name}"\n'
                           f'generate = {{ steps = {CLI_STEPS} }}\n\n[model.inputs]\n{inputs}\n')
    return "\n".join(entries)


def cli_samples() -> dict[str, np.ndarray]:
    from fixture_repo.harness import left_padded_prompts

    text = left_padded_prompts(6, 100)  # 4 rows, 2 of them left-padded
    return {**{f"{name}_{key}": value for name in FAMILIES
               for key, value in SAMPLES[name]().items()},
            **{f"{name}-text_{key}": text[key] for name in FAMILIES for key in TEXT}}


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, dict], Path]:
    from fixture_repo.harness import run_cli, write_model_repo

    root = tmp_path_factory.mktemp("vl_families")
    repo = write_model_repo(root, ("vlm", SOURCE), cli_samples(), cli_config())
    run = run_cli("check", "--jobs", "1", cwd=repo, out=root / "out")
    assert run.code in (0, 1), run.stdout + run.stderr
    return run, run.models(), root / "out"


def errors(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def checks(result: dict, file: str) -> list[dict]:
    return [check for check in result["generation"]["pipeline"]["checks"]
            if check["file"] == file]


@pytest.mark.slow
def test_the_three_families_pass_through_the_cli(cli: tuple[Any, dict, Path]) -> None:
    run, models, _ = cli
    assert run.code == 0, {name: errors(result) for name, result in models.items()}
    for name in FAMILIES:
        generation = models[name]["generation"]
        assert generation["pipeline"]["family"] == name
        assert generation["tokens_agree"] == [CLI_STEPS] * 3  # one image, two (tiles), text
        assert max(generation["max_logit_diff"]) < 1e-4
        print(name, "max logit diff per step:", generation["max_logit_diff"])


@pytest.mark.slow
def test_text_only_prompts_pass_through_a_vision_file_exported_from_the_familys_own_image(
        cli: tuple[Any, dict, Path]) -> None:
    _, models, out = cli
    for name in FAMILIES:
        generation = models[f"{name}-text"]["generation"]
        assert generation["tokens_agree"] == [CLI_STEPS] * 4
        assert max(generation["max_logit_diff"]) < 1e-4
        embedding = [c["case"] for c in checks(models[f"{name}-text"], "embedding")]
        assert embedding == ["one image", "two images", "no image"]  # the example image's
        assert (out / f"{name}-text.vision.onnx").is_file()
    tiles = [(c["case"], c["seen"]) for c in checks(models["idefics3-text"], "vision")]
    assert tiles == [("1x1x3x32x32", True), ("1x2x3x32x32", False)]  # its example, one unseen
    for name in ("llava", "gemma3"):
        assert [c["case"] for c in checks(models[f"{name}-text"], "vision")] == ["1x3x32x32"]
    derived = models["gemma3-text"]["generation"]["pipeline"]["derived"]
    assert [item.split(":")[0] for item in derived] == ["token_type_ids"]


@pytest.mark.slow
def test_each_vision_file_is_checked_at_the_resolutions_it_takes(
        cli: tuple[Any, dict, Path]) -> None:
    _, models, _ = cli
    for name in FAMILIES:
        vision = checks(models[name], "vision")
        assert all(check["passed"] and check["max_abs_diff"] < 1e-5 for check in vision), vision
        print(name, "vision:", [(c["case"], c["max_abs_diff"]) for c in vision])
    one_size = [[c["case"] for c in checks(models[name], "vision")] for name in ("llava",
                                                                               "gemma3")]
    assert one_size == [["1x3x32x32"], ["1x3x32x32"]]  # one size, no unseen one
    tiles = checks(models["idefics3"], "vision")
    assert [(c["case"], c["seen"], c["shape"]) for c in tiles] == [
        ("1x5x3x32x32", True, [20, 32]), ("1x1x3x32x32", True, [4, 32]),
        ("1x6x3x32x32", False, [24, 32])]


@pytest.mark.slow
def test_each_embedding_file_is_checked_with_one_two_and_no_images(
        cli: tuple[Any, dict, Path]) -> None:
    _, models, _ = cli
    for name in FAMILIES:
        embedding = checks(models[name], "embedding")
        assert [c["case"] for c in embedding] == ["one image", "two images", "no image"]
        assert all(c["passed"] and c["max_abs_diff"] < 1e-6 for c in embedding), embedding
        print(name, "embedding:", [(c["case"], c["max_abs_diff"]) for c in embedding])


@pytest.mark.slow
def test_gemma3s_decoder_takes_token_type_ids_and_every_image_axis_is_dynamic(
        cli: tuple[Any, dict, Path]) -> None:
    import onnx

    _, _, out = cli

    def layout(path: Path) -> dict[str, list[Any]]:
        graph = onnx.load(str(path), load_external_data=False).graph
        return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
                for value in [*graph.input, *graph.output]}

    gemma3 = layout(out / "gemma3.onnx")
    assert all(isinstance(axis, str) for axis in gemma3["token_type_ids"])
    assert "token_type_ids" not in layout(out / "llava.onnx")
    tiles = layout(out / "idefics3.vision.onnx")
    assert isinstance(tiles["pixel_values"][1], str)
    assert tiles["pixel_values"][2:] == [3, 32, 32]
    assert isinstance(tiles["image_features"][0], str)
    assert layout(out / "llava.vision.onnx")["pixel_values"] == [1, 3, 32, 32]


@pytest.mark.slow
def test_the_generation_rows_name_the_files(cli: tuple[Any, dict, Path]) -> None:
    _, _, out = cli
    summary = (out / "report.md").read_text(encoding="utf-8")
    steps = f"tokens agree {CLI_STEPS}/{CLI_STEPS}"
    assert f"vision 3 resolutions, embedding, decoder: {steps}" in summary  # 5, 1, 6 tiles
    assert summary.count(f"vision 1 resolution, embedding, decoder: {steps}") == 4
    assert f"vision 2 resolutions, embedding, decoder: {steps}" in summary  # idefics3-text


# ---- a planted wrong vision wrapper ----

ROTATED = SOURCE + '''

def idefics3_tiles_rotated():
    """The vision wrapper takes the whole image (the processor's last tile) for the first:
    right on a prompt of one tile, wrong on five."""
    from onnx_parity.models.vision_language import idefics3 as vl_idefics3

    wrapper = vl_idefics3._vision_class()
    original = wrapper.forward

    def rotated(self, pixel_values, pixel_attention_mask):
        return original(self, torch.roll(pixel_values, 1, dims=1), pixel_attention_mask)

    wrapper.forward = rotated
    return idefics3()
'''


@pytest.mark.slow
def test_a_wrong_vision_file_is_named_with_its_tile_count(tmp_path: Path) -> None:
    from fixture_repo.harness import run_cli, write_model_repo

    samples = {f"idefics3_{key}": value for key, value in SAMPLES["idefics3"]().items()}
    entry = next(part for part in cli_config().split("[[model]]") if '"idefics3"' in part)
    config = "[[model]]" + entry.replace("models.vlm:idefics3",
                                                            "models.vlm:idefics3_tiles_rotated")
    repo = write_model_repo(tmp_path, ("vlm", ROTATED), samples, config)
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    [result] = run.report()["models"]
    vision = [message for _, message in errors(result) if "idefics3.vision.onnx" in message]
    assert vision, errors(result)
    assert "at resolution 1x5x3x32x32 (pixel_values's shape)" in vision[0]
    assert [(c["case"], c["passed"]) for c in checks(result, "vision")] == [
        ("1x5x3x32x32", False), ("1x1x3x32x32", True), ("1x6x3x32x32", False)]
    print(vision[0])
