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


def lfm2_stuck():
    model = lfm2()
    old = model.model.layers[0].conv
    stuck = StuckConv(model.config, 0)
    stuck.load_state_dict(old.state_dict())
    model.model.layers[0].conv = stuck.eval()
    return model
'''

FAMILIES = ("lfm2", "lfm2_stuck")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run over every family's model: name -> its report.json record."""
    root = tmp_path_factory.mktemp("hybrid")
    entries = "".join(
        f'[[model]]\nname = "{name}"\nfactory = "models.hybrid:{name}"\n'
        'inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
        f'"samples/attention_mask.npy" }}\ngenerate = {{ steps = {STEPS} }}\n'
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
