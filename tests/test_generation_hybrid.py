"""Hybrid decoders (issue 34 §2): conv and recurrent states beside the attention layers' keys
and values, through the real CLI.

One repository holds every family's tiny seeded model (hidden 64, attention and state layers
mixed, vocabulary 500) and one `onnx-parity check` runs them all; each test reads its model's
record. A planted model whose exported conv state stops advancing after the prompt pass must
fail at step 1, on that state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_repo.harness import left_padded_prompts, run_cli, write_model_repo

pytest.importorskip("torch")
STEPS = 6

MODELS = '''
import torch
import transformers as T
from transformers.models.lfm2 import modeling_lfm2

SIZES = dict(hidden_size=64, vocab_size=500, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, max_position_embeddings=256)


def lfm2():
    torch.manual_seed(0)
    config = T.Lfm2Config(**SIZES, block_ff_dim=128, num_hidden_layers=3, conv_L_cache=3,
                          layer_types=["conv", "full_attention", "conv"])
    return T.Lfm2ForCausalLM(config).eval()


class StuckConv(modeling_lfm2.Lfm2ShortConv):
    """Right in PyTorch; in an exported graph its conv state, once not empty, is returned as it
    came in: a present wired to its past from the first one-token step on."""

    def forward(self, hidden_states, past_key_values=None, attention_mask=None, **kwargs):
        layer = past_key_values.layers[self.layer_idx] if past_key_values is not None else None
        given = layer.conv_states[0] if layer is not None and layer.has_previous_state[0] else None
        before = given.clone() if given is not None else None
        out = super().forward(hidden_states, past_key_values, attention_mask, **kwargs)
        if before is not None and (torch.compiler.is_compiling() or torch.jit.is_tracing()):
            state = layer.conv_states[0]
            layer.conv_states[0] = torch.where(before.abs().amax() > 0, before, state)
        return out


def qwen3_next():
    torch.manual_seed(0)
    config = T.Qwen3NextConfig(**SIZES, num_hidden_layers=2, head_dim=16,
                               layer_types=["linear_attention", "full_attention"],
                               linear_num_key_heads=2, linear_num_value_heads=4,
                               linear_key_head_dim=16, linear_value_head_dim=16,
                               linear_conv_kernel_dim=4, num_experts=0, mlp_only_layers=[0, 1])
    return T.Qwen3NextForCausalLM(config).eval()


def qwen3_5():
    torch.manual_seed(0)
    config = T.Qwen3_5TextConfig(**SIZES, num_hidden_layers=2, head_dim=16,
                                 layer_types=["linear_attention", "full_attention"],
                                 linear_num_key_heads=2, linear_num_value_heads=4,
                                 linear_key_head_dim=16, linear_value_head_dim=16,
                                 linear_conv_kernel_dim=4)
    return T.Qwen3_5ForCausalLM(config).eval()


MAMBA = dict(mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=1,
             mamba_expand=2, mamba_chunk_size=4, mamba_d_conv=4)  # 10-token prompts: 3 chunks


def granite():
    torch.manual_seed(0)
    config = T.GraniteMoeHybridConfig(**SIZES, **MAMBA, num_hidden_layers=2,
                                      layer_types=["mamba", "attention"], num_local_experts=0,
                                      shared_intermediate_size=128)
    return T.GraniteMoeHybridForCausalLM(config).eval()


def falcon_h1():
    torch.manual_seed(0)
    config = T.FalconH1Config(**SIZES, **MAMBA, num_hidden_layers=2, head_dim=16, mamba_d_ssm=128)
    return T.FalconH1ForCausalLM(config).eval()


def mamba2():
    torch.manual_seed(0)
    config = T.Mamba2Config(hidden_size=64, vocab_size=500, num_hidden_layers=2, num_heads=8,
                            head_dim=16, state_size=16, n_groups=1, expand=2, chunk_size=4,
                            conv_kernel=4)
    return T.Mamba2ForCausalLM(config).eval()


def granite_bundled():
    return granite()


def lfm2_stuck():
    model = lfm2()
    old = model.model.layers[0].conv
    stuck = StuckConv(model.config, 0)
    stuck.load_state_dict(old.state_dict())
    model.model.layers[0].conv = stuck.eval()
    return model
'''

FAMILIES = ("lfm2", "lfm2_stuck", "qwen3_next", "qwen3_5", "granite", "falcon_h1", "mamba2",
            "granite_bundled")
GENAI = ' bundle = ["onnxruntime-genai"],'  # the LFM2 entry also runs genai's own loop
DEPLOYED = {"lfm2": GENAI + ' runtime = "onnxruntime-genai",', "granite_bundled": GENAI}
# Each family's states, by layer: the file's past names beyond the attention layers' keys.
STATES = {
    "qwen3_next": ["past_key_values.1.key", "past_key_values.1.value", "past.0.conv",
                   "past.0.recurrent"],
    "granite": ["past_key_values.1.key", "past_key_values.1.value", "past.0.conv",
                "past.0.recurrent"],
    "falcon_h1": [f"past_key_values.{n}.{p}" for n in range(2) for p in ("key", "value")]
    + [f"past.{n}.{k}" for n in range(2) for k in ("conv", "recurrent")],
    "mamba2": [f"past.{n}.{k}" for n in range(2) for k in ("conv", "recurrent")],
}
STATES["qwen3_5"] = STATES["qwen3_next"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run over every family's model: name -> its report.json record."""
    root = tmp_path_factory.mktemp("hybrid")
    entries = "".join(
        f'[[model]]\nname = "{name}"\nfactory = "models.hybrid:{name}"\n'
        'inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
        f'"samples/attention_mask.npy" }}\n'
        f'generate = {{ steps = {STEPS},{DEPLOYED.get(name, "")} }}\n'.replace(", }", " }")
        for name in FAMILIES)
    repo = write_model_repo(root, ("hybrid", MODELS), left_padded_prompts(10, 500),
                            "batch-sizes = [1, 4]\n" + entries)
    done = run_cli("check", cwd=repo, out=root / "out")
    assert done.code in (0, 1), done.stdout + done.stderr
    return {"out": root / "out", **{model["name"]: model for model in done.report()["models"]}}


def errors(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def compared(result: dict) -> dict[str, list[float]]:
    """Each compared output's max abs diff, step by step."""
    found: dict[str, list[float]] = {}
    for row in sorted(result["comparisons"], key=lambda row: row["dimensions"]["step"]):
        found.setdefault(row["output"], []).append(row["max_abs_diff"])
    return found


def onnx_layout(path: Path) -> dict[str, list[str | int]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in [*graph.input, *graph.output]}


@pytest.mark.slow
def test_lfm2_generates_with_its_conv_states_in_genais_names(run: dict) -> None:
    result = run["lfm2"]
    assert result["passed"], errors(result)
    generation = result["generation"]
    assert generation["tokens_agree"] == [STEPS] * 4
    assert max(generation["max_logit_diff"]) <= result["atol"]
    layout = onnx_layout(run["out"] / "lfm2.onnx")
    # onnxruntime-genai 0.18's LFM2 names: keys only for the attention layer, conv states of
    # (batch, hidden, conv_L_cache - 1) for the conv layers
    assert [name for name in layout if "past" in name] == [
        "past_key_values.1.key", "past_key_values.1.value", "past.0.conv", "past.2.conv"]
    assert layout["past.0.conv"] == ["batch", 64, 2]
    assert layout["present.2.conv"] == ["batch", 64, 2]
    diffs = compared(result)
    assert set(diffs) == {"logits", "present.0.conv", "present.1.key", "present.1.value",
                          "present.2.conv"}
    steps = {row["dimensions"]["step"] for row in result["comparisons"]}
    assert steps == set(range(STEPS))
    assert all(np.isfinite(diff) and diff <= result["atol"] for diff in diffs["present.0.conv"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATES))
def test_gated_delta_and_mamba_families_generate_with_every_state_compared(
        run: dict, name: str) -> None:
    result = run[name]
    assert result["passed"], errors(result)
    assert result["generation"]["tokens_agree"] == [STEPS] * 4
    layout = onnx_layout(run["out"] / f"{name}.onnx")
    assert sorted(name for name in layout if "past" in name) == sorted(STATES[name])
    presents = {state.replace("past_key_values", "present").replace("past.", "present.")
                for state in STATES[name]}
    diffs = compared(result)
    assert set(diffs) == {"logits", *presents}
    for output in diffs:  # every state at every step (and step 0 at batch size 1 too)
        assert {row["dimensions"]["step"] for row in result["comparisons"]
                if row["output"] == output} == set(range(STEPS))
    assert all(diff <= result["atol"] for values in diffs.values() for diff in values)


@pytest.mark.slow
def test_onnxruntime_genai_runs_the_lfm2_bundle_and_no_other_hybrid(run: dict) -> None:
    runtime = run["lfm2"]["generation"]["runtime"]
    assert runtime["tokens_agree"] == runtime["compared"]  # genai's tokens are transformers'
    assert sum(runtime["compared"]) == 4 * STEPS
    import json

    config = json.loads((run["out"] / "lfm2.genai" / "genai_config.json").read_text())
    decoder = config["model"]["decoder"]
    assert decoder["inputs"]["past_conv_names"] == "past.%d.conv"
    assert decoder["outputs"]["present_conv_names"] == "present.%d.conv"
    [message] = [message for code, message in errors(run["granite_bundled"])
                 if code == "bundle-error"]
    assert "carries conv and recurrent states for its lfm2, lfm2_moe" in message
    assert 'the builder writes this model as "granitemoehybrid"' in message


@pytest.mark.slow
def test_a_conv_state_that_stops_advancing_fails_at_step_1(run: dict) -> None:
    result = run["lfm2_stuck"]
    assert not result["passed"]
    [message] = [message for code, message in errors(result) if code == "parity-mismatch"]
    assert message.startswith("generation step 1 ")
    assert "present.0.conv" in message
    failing = {row["output"] for row in result["comparisons"]
               if not row["passed"] and row["dimensions"]["step"] == 1}
    assert failing == {"present.0.conv"}  # the logits of step 1 come from a right past
    assert all(row["passed"] for row in result["comparisons"] if row["dimensions"]["step"] == 0)


def lfm2_config() -> Any:
    import transformers

    return transformers.Lfm2Config(hidden_size=64, vocab_size=500, num_attention_heads=4,
                                   num_key_value_heads=2, num_hidden_layers=3,
                                   layer_types=["conv", "full_attention", "conv"])


def test_a_hybrid_cache_gives_keys_for_its_attention_layers_only() -> None:
    from onnx_parity.models import LoadError
    from onnx_parity.models.call_arguments import cache_key_layers, check_dotted

    config = lfm2_config()
    assert cache_key_layers(config) == (1,)
    names = ["past_key_values.1.key", "past_key_values.1.value", "past.0.conv", "past.2.conv"]
    assert check_dotted(names, "m", config) == ("past_key_values", "past")
    with pytest.raises(LoadError) as raised:  # without the config, every layer from 0
        check_dotted(names, "m")
    assert 'lacks "past_key_values.0.key", "past_key_values.0.value"' in str(raised.value)
    with pytest.raises(LoadError) as raised:  # the attention layer's keys are still needed
        check_dotted(["past_key_values.1.key", "past.0.conv"], "m", config)
    assert 'lacks "past_key_values.1.value"' in str(raised.value)


def test_the_step_names_its_states_in_genais_pattern_and_feeds_presents_back() -> None:
    from onnx_parity.models.generating.base import CacheShape, StateSlot

    shape = CacheShape(3, 2, 16, True, attention=(1,), states=(
        StateSlot(0, "conv", (64, 2)), StateSlot(2, "conv", (64, 2))))
    assert shape.names("present") == ("present.0.conv", "present.1.key", "present.1.value",
                                       "present.2.conv")
    assert shape.past_names()["present.2.conv"] == "past.2.conv"
    empty = shape.empty_past(4, np.dtype(np.float32))
    assert empty["past.0.conv"].shape == (4, 64, 2)
    assert not empty["past.0.conv"].any()
    assert empty["past_key_values.1.key"].shape == (4, 2, 0, 16)
