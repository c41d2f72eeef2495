"""The vision-language families other than Qwen (issue 29): LLaVA, Idefics3 and Gemma 3.

The families' own members first, in PyTorch on both sides: each wrapper against the model's own
code, and the three parts chained (vision per image, embedding, decoder with its cache) against
the model's greedy `generate`, tokens and logits: the split must reproduce the model. Then the
real CLI on one repository holding the three models.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from onnx_parity.models.decoder import CacheShape
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.vision_language import family_of
from vl_family_models import IMAGE, SAMPLES, SOURCE

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
