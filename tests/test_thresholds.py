"""Position thresholds crossed (issue 28, section 1): the lengths a generating model's config
names and transformers' code compares a length with, each crossed by decoding steps at past
lengths T - 2, T - 1 and T from a built past, both sides fed the same inputs.

The end-to-end test runs the real CLI once on four tiny seeded models (8-token prompts, a
left-padded batch of 4): a LongRoPE Phi3 with its threshold at 32, the same Phi3 without
scaling, a Mistral with a window of 4, and a dynamic-NTK Llama built for 32 positions and
deployed to 64 (`max-context`), whose TorchScript file (dynamo refuses the rope's branch) keeps
the frequencies of the export's length.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import left_padded_prompts, run_cli, write_model_repo
from test_generation import CONFIG, config_error, errors

MODELS = '''
import torch


def _phi3(**extra):
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(0)
    return Phi3ForCausalLM(Phi3Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)).eval()


def phi3_longrope():
    """LongRoPE switching to long_factor past 32 positions (head_dim 8: 4 factors each)."""
    return _phi3(original_max_position_embeddings=32, rope_scaling={
        "type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0, 4.0, 7.0, 10.0]})


def phi3():
    return _phi3()


def mistral_sliding():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    return MistralForCausalLM(MistralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        sliding_window=4)).eval()


def llama_dynamic():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        rope_scaling={"rope_type": "dynamic", "factor": 4.0})).eval()
'''
PROMPTS = 'inputs = { input_ids = "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }\n'


def prompts() -> dict[str, np.ndarray]:
    return left_padded_prompts(8)


def entry(name: str, generate: str) -> str:
    return (f'[[model]]\nname = "{name}"\nfactory = "models.library:{name}"\n{PROMPTS}'
            f"generate = {generate}\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("thresholds")
    repo = write_model_repo(root, ("library", MODELS), prompts(), "batch-sizes = [4]\n" + "".join(
        [entry("phi3_longrope", "{ steps = 4 }"), entry("phi3", "{ steps = 4 }"),
         entry("mistral_sliding", "{ steps = 4 }"),
         entry("llama_dynamic", "{ steps = 4, max-context = 64 }")]))
    done = run_cli("check", "--jobs", "1", cwd=repo, out=root / "out")
    assert done.code == 1, done.stdout + done.stderr
    models = done.models()
    models["report.md"] = {"text": (root / "out" / "report.md").read_text(encoding="utf-8")}
    return models


def one(result: dict) -> dict:
    [threshold] = result["generation"]["thresholds"]
    return threshold


@pytest.mark.slow
def test_a_longrope_phi3_agrees_across_its_threshold(run: dict[str, dict]) -> None:
    """The stock LongRoPE of transformers 5.23 selects its factors with torch.where inside the
    graph: the file switches where PyTorch does. (It failed here only while the export left
    torch.export's FakeTensor `long_inv_freq` on the module, which PyTorch then computed with.)"""
    result = run["phi3_longrope"]
    assert result["passed"], errors(result)
    threshold = one(result)
    assert (threshold["key"], threshold["value"], threshold["passed"]) == (
        "original_max_position_embeddings", 32, True)
    assert [step["past"] for step in threshold["steps"]] == [30, 31, 32]
    assert all(step["max_logit_diff"] <= result["atol"] and step["tokens_agree"] == 4
               for step in threshold["steps"])
    assert "extended by 22 positions" in threshold["built"]


@pytest.mark.slow
def test_a_phi3_without_scaling_has_no_threshold_and_passes(run: dict[str, dict]) -> None:
    result = run["phi3"]
    assert result["passed"], errors(result)
    assert result["generation"]["thresholds"] == []


@pytest.mark.slow
def test_a_sliding_window_mistral_passes_across_its_window(run: dict[str, dict]) -> None:
    result = run["mistral_sliding"]
    assert result["passed"], errors(result)
    threshold = one(result)
    assert (threshold["key"], threshold["value"], threshold["layers"]) == ("sliding_window", 4, [])
    assert [step["past"] for step in threshold["steps"]] == [2, 3, 4]
    assert all(not step["differing_rows"] for step in threshold["steps"])
    assert "last 2 positions" in threshold["built"]  # the window is shorter than the prompts


@pytest.mark.slow
def test_a_dynamic_rope_baked_at_export_fails_past_its_threshold(run: dict[str, dict]) -> None:
    result = run["llama_dynamic"]
    threshold = one(result)
    assert (threshold["key"], threshold["value"], threshold["passed"]) == (
        "max_position_embeddings", 32, False)
    below, at, past = threshold["steps"]
    assert below["max_logit_diff"] <= result["atol"]
    assert not below["differing_rows"]
    assert at["max_logit_diff"] <= result["atol"]
    assert not at["differing_rows"]
    assert past["max_logit_diff"] > result["atol"]
    assert past["differing_rows"]
    [finding] = [f for f in result["findings"] if f["code"] == "position-threshold"]
    assert finding["severity"] == "error"
    assert finding["message"].startswith("`max_position_embeddings` = 32")
    assert "past length 32 (33 positions, past it)" in finding["message"]
    assert f"rows {', '.join(map(str, past['differing_rows']))}" in finding["message"]
    assert finding["details"]["past_length"] == 32
    assert finding["details"]["max_abs_diff"] == past["max_logit_diff"]
    assert "max-context = 32" in finding["fix"]
    report = run["report.md"]["text"]
    assert "thresholds: max_position_embeddings = 32 ❌" in report
    assert "| ❌ | `max_position_embeddings` | 32 | all | past 30:" in report


# ---- reading the thresholds from the config, per architecture ----

def _thresholds(config: object) -> list[tuple[str, int, tuple[int, ...]]]:
    from onnx_parity.models.generating.thresholds import thresholds

    return [(item.key, item.value, item.layers) for item in thresholds(config)]


def test_longrope_and_dynamic_rope_switch_on_a_length_and_the_static_types_do_not() -> None:
    from transformers import LlamaConfig, Phi3Config

    longrope = Phi3Config(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                          max_position_embeddings=64, original_max_position_embeddings=32,
                          rope_parameters={"rope_type": "longrope", "short_factor": [1.0] * 4,
                                        "long_factor": [2.0] * 4})
    assert _thresholds(longrope) == [("original_max_position_embeddings", 32, ())]
    assert _thresholds(Phi3Config(num_hidden_layers=2)) == []
    rope = {"dynamic": {"factor": 2.0}, "linear": {"factor": 2.0},
            "yarn": {"factor": 2.0, "original_max_position_embeddings": 16},
            "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 16}}
    found = {kind: _thresholds(LlamaConfig(num_hidden_layers=2, max_position_embeddings=32,
                                           rope_parameters={"rope_type": kind, **more}))
             for kind, more in rope.items()}
    assert found == {"dynamic": [("max_position_embeddings", 32, ())], "linear": [],
                     "yarn": [], "llama3": []}


def test_llama_4_scaling_steps_at_original_max_position_embeddings() -> None:
    from transformers import Ministral3Config

    assert _thresholds(Ministral3Config(num_hidden_layers=2)) == [  # yarn + llama_4_scaling_beta
        ("original_max_position_embeddings", 16384, ())]


def test_sliding_and_chunked_layers_are_read_per_layer_type() -> None:
    from transformers import (
        Gemma3TextConfig,
        Llama4TextConfig,
        LlamaConfig,
        MistralConfig,
        Qwen2Config,
    )

    assert _thresholds(MistralConfig(num_hidden_layers=2, sliding_window=4)) == [
        ("sliding_window", 4, ())]
    assert _thresholds(Qwen2Config(num_hidden_layers=2, use_sliding_window=True,
                                   sliding_window=4, max_window_layers=1)) == [
        ("sliding_window", 4, (1,))]
    assert _thresholds(Qwen2Config(num_hidden_layers=2, sliding_window=4)) == []  # not used
    gemma3 = Gemma3TextConfig(num_hidden_layers=6, sliding_window=4)  # 5 sliding : 1 full
    assert _thresholds(gemma3) == [("sliding_window", 4, (0, 1, 2, 3, 4))]
    assert _thresholds(Llama4TextConfig(num_hidden_layers=4, attention_chunk_size=8)) == [
        ("attention_chunk_size", 8, (0, 1, 2))]
    assert _thresholds(LlamaConfig(num_hidden_layers=2)) == []


def test_the_context_is_max_context_or_max_position_embeddings() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from onnx_parity.models.generating.thresholds import position_limits
    from onnx_parity.verification.generation.thresholds import past_lengths

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=32,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0}))
    default, wider = position_limits(model, None), position_limits(model, 64)
    [threshold] = default.thresholds
    assert (default.context, default.context_key) == (32, "max_position_embeddings")
    assert not default.crossed(threshold)  # a step at 33 positions is past the context
    assert (wider.context, wider.context_key) == (64, "max-context")
    assert wider.crossed(threshold)
    assert position_limits(torch.nn.Linear(2, 2), None).thresholds == ()
    assert past_lengths(32) == (30, 31, 32)
    assert past_lengths(2) == (1, 2)


def test_max_context_is_read_and_a_bad_value_names_the_key(tmp_path: Path) -> None:
    from onnx_parity.settings.loading import load_settings

    (tmp_path / "onnx-parity.toml").write_text(
        CONFIG + "generate = { steps = 4, max-context = 4096 }\n", encoding="utf-8")
    [spec] = load_settings(tmp_path).models
    assert spec.generate is not None
    assert spec.generate.max_context == 4096
    for value, said in (("1", "is not between 2 and"), ('"4k"', "expected a whole number")):
        message = config_error(tmp_path, CONFIG + f"generate = {{ steps = 4, max-context = "
                               f"{value} }}\n")
        assert "generate.max-context" in message
        assert said in message


def test_a_built_past_extends_a_real_prefix_at_its_scale() -> None:
    from onnx_parity.verification.generation.threshold_past import _extended

    generator = np.random.default_rng(1)
    prefix = generator.normal(3.0, 0.5, (2, 2, 8, 4)).astype(np.float32)
    mask = np.ones((2, 8), dtype=np.int64)
    extended = _extended(prefix, mask, 400, np.random.default_rng(0))
    assert extended.shape == (2, 2, 400, 4)
    assert extended.dtype == np.float32
    assert np.array_equal(extended[:, :, :8], prefix)
    drawn = extended[:, :, 8:]
    assert abs(float(drawn.mean()) - float(prefix.mean())) < 0.1
    assert abs(float(drawn.std()) - float(prefix.std())) < 0.1


def test_a_difference_past_the_threshold_names_key_value_length_figure_and_rows() -> None:
    from onnx_parity.generation_results import GenerationResult, ThresholdRun, ThresholdStep
    from onnx_parity.models import Threshold
    from onnx_parity.report.generation.generation_json import (
        generation_from_json,
        generation_to_json,
    )
    from onnx_parity.verification.generation.thresholds import _compared, _finding

    expected = np.zeros((3, 5), dtype=np.float32)
    expected[:, 1] = 1.0
    actual = expected.copy()
    actual[2, 3] = 4.0  # row 2 picks token 3
    step = _compared(32, expected, actual, (1e-5, 1e-4))
    assert (step.max_logit_diff, step.tokens_agree, step.differing_rows) == (4.0, 2, (2,))
    run = ThresholdRun("original_max_position_embeddings", 32, (),
                       (ThresholdStep(30, 0.0, 3, 3, ()), step), "built")
    finding = _finding(run, Threshold(run.key, 32, "long factors"), (1e-5, 1e-4))
    assert finding.message.startswith("`original_max_position_embeddings` = 32: long factors.")
    assert "past length 32 (33 positions, past it)" in finding.message
    assert "max logit diff 4 (atol 1e-05), rows 2" in finding.message
    assert "torch.where(seq_len > 32, long, short)" in (finding.fix or "")
    result = GenerationResult(4, 3, (4, 4, 4), None, (0.0,) * 4, None, thresholds=(run,))
    assert generation_from_json(generation_to_json(result)) == result
