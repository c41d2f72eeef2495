"""Decoders whose forward takes no cache the tool can feed back (issue 34 §4): GPT-1 (none),
XLM (its own `cache` dict), XLNet (`mems`), and a BERT built without is_decoder (whose forward
takes a cache and returns none), through the real CLI. Each step runs the whole
prefix again on both sides; the file takes the prefix and returns logits only.

One repository holds every model (tiny seeded configs: hidden 64, 2 layers, vocabulary 500) and
one `onnx-parity check` runs them all; each test reads its model's record. A planted GPT-1 whose
exported head is off must fail at step 0 with its repro folder. Reformer reaches the export and
does not export (docs/generation.md), so it is not here.
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


def gpt1():
    torch.manual_seed(0)
    return T.OpenAIGPTLMHeadModel(T.OpenAIGPTConfig(
        vocab_size=500, n_embd=64, n_layer=2, n_head=4, n_positions=128)).eval()


def xlm():
    torch.manual_seed(0)
    return T.XLMWithLMHeadModel(T.XLMConfig(
        vocab_size=500, emb_dim=64, n_layers=2, n_heads=4, max_position_embeddings=128,
        causal=True)).eval()


def xlnet():
    torch.manual_seed(0)
    return T.XLNetLMHeadModel(T.XLNetConfig(
        vocab_size=500, d_model=64, n_layer=2, n_head=4, d_inner=128)).eval()


def bert():
    """A BERT built as users of transformers' auto classes get it: no is_decoder, so forward
    takes past_key_values and returns none."""
    torch.manual_seed(0)
    return T.BertLMHeadModel(T.BertConfig(
        vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=128)).eval()


class OffHead(torch.nn.Linear):
    """Right in PyTorch; in an exported graph its logits are 1e-2 off."""

    def forward(self, x):
        out = super().forward(x)
        if torch.compiler.is_compiling() or torch.jit.is_tracing():
            out = out + 1e-2
        return out


def gpt1_off():
    model = gpt1()
    head = OffHead(64, 500, bias=False)
    head.weight = model.lm_head.weight
    model.lm_head = head
    return model
'''

NAMES = ("gpt1", "xlm", "xlnet", "bert")
REASONS = {"gpt1": "forward takes no cache", "xlm": "forward takes no cache",
           "xlnet": "forward takes no cache",
           "bert": "forward returns no cache after a prompt pass"}
# Beside them: GPT-1 with an int8 variant scored on text, GPT-1 asking for a genai bundle, and
# a GPT-1 whose exported head is off.
EXTRA = {"gpt1_off": 'factory = "models.nocache:gpt1_off"\n',
         "gpt1_int8": ('factory = "models.nocache:gpt1"\nvariants = ["int8-dynamic"]\n'
                       'eval-tokens = "samples/text_ids.npy"\n'),
         "gpt1_genai": 'factory = "models.nocache:gpt1"\n'}
GENERATE = {"gpt1_genai": ', bundle = ["onnxruntime-genai"]'}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run over every model: name -> its report.json record, and the report's text."""
    root = tmp_path_factory.mktemp("whole_prefix")
    entries = "".join(
        f'[[model]]\nname = "{name}"\n'
        + EXTRA.get(name, f'factory = "models.nocache:{name}"\n')
        + 'inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
        f'"samples/attention_mask.npy" }}\n'
        f'generate = {{ steps = {STEPS}{GENERATE.get(name, "")} }}\n'
        for name in (*NAMES, *EXTRA))
    repo = write_model_repo(root, ("nocache", MODELS), left_padded_prompts(10, 500),
                            "batch-sizes = [1, 4]\n" + entries)
    text = np.random.default_rng(1).integers(3, 500, (3, 16)).astype(np.int64)
    np.save(repo / "samples" / "text_ids.npy", text)
    done = run_cli("check", cwd=repo, out=root / "out")
    assert done.code in (0, 1), done.stdout + done.stderr
    report = (root / "out" / "report.md").read_text()
    return {"out": root / "out", "report.md": report,
            **{model["name"]: model for model in done.report()["models"]}}


def errors(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def onnx_layout(path: Path) -> dict[str, list[str | int]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in [*graph.input, *graph.output]}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_a_decoder_with_no_cache_generates_by_rerunning_the_whole_prefix(
        run: dict, name: str) -> None:
    result = run[name]
    assert result["passed"], errors(result)
    generation = result["generation"]
    assert generation["whole_prefix"] is True
    assert generation["whole_prefix_reason"] == REASONS[name]
    assert generation["tokens_agree"] == [STEPS] * 4
    assert max(generation["max_logit_diff"]) <= result["atol"]
    layout = onnx_layout(run["out"] / f"{name}.onnx")
    assert not [item for item in layout if "past" in item or "present" in item]
    assert layout["input_ids"] == ["batch", "sequence"]
    assert layout["logits"] == ["batch", "sequence", 500]
    # every step compares the logits of the whole prefix: 10 prompt positions, then one more
    rows = [row for row in result["comparisons"] if row["output"] == "logits"]
    assert {row["dimensions"]["step"] for row in rows} == set(range(STEPS))
    widths = {row["dimensions"]["step"]: row["input_shapes"]["attention_mask"][1]
              for row in rows}
    assert widths == {step: 10 + step for step in range(STEPS)}
    assert all(np.isfinite(row["max_abs_diff"]) for row in rows)


@pytest.mark.slow
def test_the_generation_row_says_the_loop_reran_the_whole_prefix(run: dict) -> None:
    rows = [line for line in run["report.md"].splitlines()
            if "each step re-ran the whole prefix" in line]
    assert len(rows) == len(NAMES) + len(EXTRA), run["report.md"]
    [bert] = [line for line in rows if "| `bert` |" in line]
    assert "(forward returns no cache after a prompt pass)" in bert


@pytest.mark.slow
def test_a_whole_prefix_step_outside_the_tolerance_fails_with_its_repro_folder(
        run: dict) -> None:
    result = run["gpt1_off"]
    [(code, message)] = errors(result)
    assert code == "parity-mismatch"
    assert message.startswith("generation step 0 (past length 0)")
    step = result["repro"]["step"]
    assert (step["step"], step["past_length"]) == (0, 0)
    assert step["inputs"] == ["input_ids", "attention_mask"]
    assert step["reproduces"] is True
    assert step["max_abs_diff"] == pytest.approx(1e-2, rel=1e-3)
    assert (run["out"] / "gpt1_off.repro").is_dir()


@pytest.mark.slow
def test_a_variant_of_a_decoder_with_no_cache_is_decoded_and_scored_on_text(run: dict) -> None:
    result = run["gpt1_int8"]
    assert result["passed"], errors(result)
    [variant] = result["variants"]
    assert variant["skipped"] is None
    [row] = variant["comparisons"]
    assert row["top1_agreement"] is not None
    assert row["top1_agreement"] > 0
    text = variant["text"]
    assert text["tokens"] == 3 * 15  # every position but each row's last predicts the next
    assert np.isfinite(text["fp32_nll"])
    assert np.isfinite(text["nll"])
    assert text["perplexity_ratio"] <= 1.1


@pytest.mark.slow
def test_a_genai_bundle_of_a_decoder_with_no_cache_is_a_bundle_error(run: dict) -> None:
    result = run["gpt1_genai"]
    [(code, message)] = errors(result)
    assert code == "bundle-error"
    assert "takes no past" in message
    assert result["generation"]["tokens_agree"] == [STEPS] * 4  # the file's own check passed
