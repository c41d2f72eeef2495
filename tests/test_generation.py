"""Generating models checked the way they generate (issue 23): `generate = { steps = N }`.

Each end-to-end test writes a fresh repository (a tiny transformers Llama or GPT-2, a
save_pretrained folder, or a hand-written flat-cache decoder; seeded random weights, offline)
with a left-padded batch of 4 prompts, and runs the real CLI.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import left_padded_prompts, run_cli, write_model_repo

MODELS = '''
import torch


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)).eval()


def llama_stopping_anywhere():
    """Every token is an end-of-sequence token: each row stops after the prompt pass."""
    model = llama()
    model.generation_config.eos_token_id = list(range(64))
    return model


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2,
                                      n_head=4)).eval()


def mistral_sliding():
    """A sliding window of 4 positions: a 6-token prompt is past it from the prompt pass."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    return MistralForCausalLM(MistralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        sliding_window=4)).eval()


def qwen2_sliding():
    """Layer 0 full attention, layer 1 a sliding window of 4 (max_window_layers = 1)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        use_sliding_window=True, sliding_window=4, max_window_layers=1)).eval()


class _Tiny(torch.nn.Module):
    """One attention layer of 2 heads of 8 with a flat cache: past = (key, value)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(64, 16)
        self.position = torch.nn.Embedding(64, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 64)
        self.position_logits = torch.nn.Embedding(64, 64)

    def body(self, input_ids, attention_mask, positions, key, value):
        b, s = input_ids.shape
        h = self.embed(input_ids) + self.position(positions)
        q, k, v = (t.reshape(b, s, 2, 8).transpose(1, 2) for t in self.qkv(h).chunk(3, -1))
        k, v = torch.cat([key, k], 2), torch.cat([value, v], 2)
        t = k.shape[2]
        allowed = torch.arange(t)[None, :] <= (torch.arange(s) + (t - s))[:, None]
        allowed = allowed[None, None] & (attention_mask[:, None, None, :] > 0)
        scores = (q @ k.transpose(2, 3) / 8 ** 0.5).masked_fill(~allowed, -1e4)
        h = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 16)
        return self.out(h), k, v


class PositionsBaked(_Tiny):
    """The one-token step takes its position from the past's length, a Python int; the prompt
    pass counts from 0. TorchScript bakes the branch it traced (the exported step has 2 new
    tokens), so the graph counts from 0 at every one-token step: wrong from step 1 on."""

    def forward(self, input_ids, attention_mask, key, value):
        b, s = input_ids.shape
        if s > 1:
            positions = torch.arange(s).expand(b, s)
        else:
            positions = torch.full((b, 1), int(key.shape[2]))
        logits, k, v = self.body(input_ids, attention_mask, positions, key, value)
        return logits + 5 * self.position_logits(positions), k, v


class NearTie(_Tiny):
    """Tokens 5 and 7 tie at the top; at one-token steps PyTorch lifts 7 by 2e-6 (a branch
    TorchScript did not trace): the tokens differ by a margin far below the tolerance."""

    def forward(self, input_ids, attention_mask, position_ids, key, value):
        logits, k, v = self.body(input_ids, attention_mask, position_ids, key, value)
        top = logits.amax(-1, keepdim=True) + 1.0
        lift = 2e-6 if input_ids.shape[1] == 1 else 0.0
        ids = torch.arange(64)
        logits = torch.where(ids == 7, top + lift, torch.where(ids == 5, top, logits))
        return logits, k, v


class EmptyPastBranch(_Tiny):
    """A branch on the past's length, as GIT's widening of its mask (modeling_git.py:841):
    torch.export takes the dynamic past as at least 2, so the file takes the branch at the
    prompt pass (past 0) too; every node of the file agrees with dynamo's program."""

    def forward(self, input_ids, attention_mask, position_ids, key, value):
        logits, k, v = self.body(input_ids, attention_mask, position_ids, key, value)
        if key.shape[2] > 0:
            logits = logits + 1.0
        return logits, k, v


class FailsOnOneToken(_Tiny):
    def forward(self, input_ids, attention_mask, key, value):
        if input_ids.shape[1] == 1:
            raise ValueError("this decoder takes no single token")
        positions = torch.arange(input_ids.shape[1]).expand(*input_ids.shape)
        return self.body(input_ids, attention_mask, positions, key, value)
'''


def prompts() -> dict[str, np.ndarray]:
    return left_padded_prompts(6)


def write_repo(root: Path, model: str) -> Path:
    return write_model_repo(
        root, ("library", MODELS), prompts(),
        'batch-sizes = [1, 4]\n[[model]]\nname = "m"\ninputs = { input_ids = '
        '"samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }\n'
        + textwrap.dedent(model))


def checked(tmp_path: Path, model: str, repo: Path | None = None) -> tuple[dict, Path]:
    repo = repo or write_repo(tmp_path, model)
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code in (0, 1), run.stdout + run.stderr
    [result] = run.report()["models"]
    return result, tmp_path / "out"


def errors(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def onnx_layout(path: Path) -> dict[str, list[str | int]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in [*graph.input, *graph.output]}


LAYOUT_INPUTS = ["input_ids", "attention_mask", "position_ids",
                 *(f"past_key_values.{n}.{p}" for n in range(2) for p in ("key", "value"))]


@pytest.mark.slow
def test_a_tiny_llama_generates_the_same_tokens_on_a_left_padded_batch(tmp_path: Path) -> None:
    result, out = checked(tmp_path, 'factory = "models.library:llama"\n'
                          "generate = { steps = 12 }\n")
    assert result["passed"], errors(result)
    generation = result["generation"]
    assert generation["steps"] == 12
    assert generation["rows"] == 4
    assert generation["tokens_agree"] == [12] * 4
    assert generation["first_token_difference"] is None
    assert generation["teacher_forced_from"] is None
    assert len(generation["max_logit_diff"]) == 12
    assert max(generation["max_logit_diff"]) <= result["atol"]
    layout = onnx_layout(out / "m.onnx")
    assert list(layout)[:len(LAYOUT_INPUTS)] == LAYOUT_INPUTS
    assert layout["attention_mask"] == ["batch", "total_sequence"]
    assert layout["past_key_values.1.value"] == ["batch", 2, "past_sequence", 8]
    assert layout["logits"] == ["batch", "sequence", 64]
    assert layout["present.0.key"][:3] == ["batch", 2, layout["present.0.key"][2]]
    assert isinstance(layout["present.0.key"][2], str)  # dynamic: past + new tokens
    # padded positions were left out of the comparisons, every step compared
    steps = {c["dimensions"]["step"] for c in result["comparisons"]}
    assert steps == set(range(12))
    assert any(c["left_out"] for c in result["comparisons"] if c["output"] == "logits")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "greedy tokens agree 12/12 steps, 4 rows" in report


@pytest.mark.slow
def test_a_tiny_gpt2_generates_the_same_tokens(tmp_path: Path) -> None:
    result, out = checked(tmp_path, 'factory = "models.library:gpt2"\n'
                          "generate = { steps = 8 }\n")
    assert result["passed"], errors(result)
    assert result["generation"]["tokens_agree"] == [8] * 4
    layout = onnx_layout(out / "m.onnx")
    assert "position_ids" in layout
    assert "present.1.value" in layout


@pytest.mark.slow
def test_sliding_window_models_generate_the_same_tokens_past_their_window(
        tmp_path: Path) -> None:
    """A Mistral and a Qwen2 (one full, one sliding layer) whose window of 4 positions every
    step is past: their own cache keeps the window's last 3 positions, the exported file's
    present the whole past; both in one run (one run costs less than two)."""
    repo = write_repo(tmp_path, 'factory = "models.library:mistral_sliding"\n'
                      "generate = { steps = 6 }\n"
                      '[[model]]\nname = "qwen2"\nfactory = "models.library:qwen2_sliding"\n'
                      'inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
                      '"samples/attention_mask.npy" }\ngenerate = { steps = 6 }\n')
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr
    for name, result in run.models().items():
        assert result["passed"], errors(result)
        assert result["exporter"] == "dynamo"
        assert result["generation"]["tokens_agree"] == [6] * 4
        assert max(result["generation"]["max_logit_diff"]) <= result["atol"]
        layout = onnx_layout(tmp_path / "out" / f"{name}.onnx")
        assert layout["past_key_values.1.key"] == ["batch", 2, "past_sequence", 8]
        # the whole past: never cut to the window
        assert layout["present.1.key"][2] in ("total_sequence", "past_sequence + sequence")
        # the presents compared at the last step: the 3 positions PyTorch's window kept
        [last] = [c for c in result["comparisons"] if c["output"] == "present.1.key"
                  and c["dimensions"]["step"] == 5 and c["batch_size"] == 4]
        assert last["total"] == 4 * 2 * 3 * 8


def test_a_cache_built_from_flat_inputs_keeps_the_whole_past_of_a_sliding_window() -> None:
    """A sliding-window layer keeps its window's last positions; the cache the exported step
    is built with holds full layers, whose present is the past plus the new tokens."""
    import torch
    from transformers import MistralConfig

    from onnx_parity.models.call_arguments import build_argument

    config = MistralConfig(num_hidden_layers=2, sliding_window=4)
    past = {f"{n}.{part}": torch.zeros(1, 2, 6, 8) for n in range(2) for part in ("key", "value")}
    cache = build_argument(past, config)
    keys, _ = cache.update(torch.ones(1, 2, 1, 8), torch.ones(1, 2, 1, 8), 1)
    assert keys.shape[2] == 7
    assert [layer.keys.shape[2] for layer in cache.layers] == [6, 7]
    assert cache.get_seq_length() == 6


@pytest.mark.slow
def test_a_position_baked_at_export_fails_from_the_first_one_token_step(tmp_path: Path) -> None:
    result, out = checked(tmp_path, 'factory = "models.library:PositionsBaked"\n'
                        'exporter = "torchscript"\n'
                        'generate = { steps = 6, cache = "flat", cache-shape = [1, 2, 8] }\n')
    assert not result["passed"]
    [mismatch] = [f for f in result["findings"] if f["code"] == "generation-mismatch"]
    assert mismatch["severity"] == "error"
    first = result["generation"]["first_token_difference"]
    assert (first["step"], first["row"]) == (1, 0)  # the prompt pass (step 0) agrees
    assert first["pytorch_token"] != first["onnx_token"]
    assert first["margin"] > result["atol"]
    assert not first["near_tie"]
    assert "step 1 of 6, batch row 0" in mismatch["message"]
    assert result["generation"]["tokens_agree"] == [1] * 4
    assert result["generation"]["teacher_forced_from"] == 2
    drift = result["generation"]["max_logit_diff"]
    assert drift[0] <= result["atol"] < drift[1]  # measured at every step, teacher-forced
    assert len(drift) == 6
    assert all(value > result["atol"] for value in drift[1:])
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "first difference at step 1, row 0 (a mismatch" in report
    assert '"m: drift along the steps"' in report  # the chart, one bar per step
    parity = [m for code, m in errors(result) if code == "parity-mismatch"]
    assert parity
    assert all(m.startswith("generation step 1 (past length 6)") for m in parity)
    # A mismatch the baked branch explains names no node: the repro folder still holds the
    # failing step, so the decoder file can be rerun where it goes wrong.
    repro = result["repro"]
    assert repro["found_by"] == "generation-step"
    assert "explained by `data-dependent-branch`" in repro["omitted"]
    assert sorted(path.name for path in (out / "m.repro").iterdir()) == [
        "REPORT.md", "repro.py", "step_expected.npz", "step_inputs.npz"]
    record = check_step_folder(result, out, 1, 6)
    assert repro["max_abs_diff"] == record["max_abs_diff"] > result["atol"]
    assert (out / "m.repro" / "REPORT.md").read_text(encoding="utf-8").startswith(
        "# onnxruntime differs from PyTorch at generation step 1 (past length 6) of `m.onnx`")
    assert "holds no subgraph: the mismatch is explained by" in report


@pytest.mark.slow
def test_a_branch_dynamo_baked_for_a_longer_past_is_said_so_not_called_uncovered(
        tmp_path: Path) -> None:
    result, _ = checked(tmp_path, 'factory = "models.library:EmptyPastBranch"\n'
                        'generate = { steps = 3, cache = "flat", cache-shape = [1, 2, 8] }\n')
    parity = [m for code, m in errors(result) if code == "parity-mismatch"]
    assert parity
    assert all(m.startswith("generation step 0 (past length 0)") for m in parity)
    assert result["generation"]["max_logit_diff"][0] == pytest.approx(1.0, abs=1e-4)
    unlocalised = result["divergence"]["unlocalised"]
    assert unlocalised.startswith("onnxruntime computes what dynamo's exported program does "
                                  "(`logits` within the tolerance")
    assert "a dynamic size as at least 2" in unlocalised
    assert "no compared value covers" not in unlocalised


def test_a_near_tie_is_a_warning_not_a_mismatch(tmp_path: Path) -> None:
    result, out = checked(tmp_path, 'factory = "models.library:NearTie"\n'
                          'exporter = "torchscript"\n'
                          'generate = { steps = 4, cache = "flat", cache-shape = [1, 2, 8] }\n'
                          '[[model.allow-warnings]]\nmatch = "Converting a tensor"\n'
                          'reason = "the near-tie test traces one branch on purpose"\n')
    [tie] = [f for f in result["findings"] if f["code"] == "generation-mismatch"]
    assert tie["severity"] == "warning", tie
    assert "near-tie" in tie["message"]
    first = result["generation"]["first_token_difference"]
    assert (first["step"], first["pytorch_token"], first["onnx_token"]) == (1, 7, 5)
    assert first["near_tie"]
    assert first["margin"] < result["atol"]
    assert not [code for code, _ in errors(result) if code in ("generation-mismatch",
                                                                "parity-mismatch")]
    assert "a near-tie" in (out / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_checkpoint_folder_generates_offline(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'transformers = "checkpoints/tiny-llama"\n'
                      "generate = { steps = 6 }\n")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    ).save_pretrained(repo / "checkpoints" / "tiny-llama")
    result, out = checked(tmp_path, "", repo)
    assert result["passed"], errors(result)
    assert result["generation"]["tokens_agree"] == [6] * 4
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert record["models"][0]["generation"]["rows"] == 4
    # PyTorch decoded first; its weights were written out while onnxruntime decoded, and the
    # file of them went with the work folder.
    log = (out / "m.log").read_text(encoding="utf-8")
    assert re.search(r"PyTorch's 5 chunk\(s\) decoded: \d+ MiB of its weights written out", log)
    assert not list(out.rglob("*.weights"))


STEP_LINE = re.compile(r"^step (\d+) (\S+): max abs diff (\S+) .* (\d+) of (\d+) elements outside$",
                       re.MULTILINE)


def step_printed(stdout: str) -> dict[str, tuple[int, float, int, int]]:
    """What repro.py prints for the failing step: per output, its step, max abs diff and how
    many elements of how many compared are outside."""
    return {name: (int(step), float(diff), int(bad), int(total))
            for step, name, diff, bad, total in STEP_LINE.findall(stdout)}


def check_step_folder(result: dict, out: Path, step: int, past: int) -> dict:
    """The repro folder holds the failing step's whole feed, keyed by the decoder file's
    input names, and PyTorch's outputs; repro.py, run with only numpy and onnxruntime beside
    the decoder file, prints the figures the check measured at that step, and without the
    file says where to put it (exit 2)."""
    from test_repro import run_repro

    record = result["repro"]["step"]
    assert (record["step"], record["past_length"], record["model"]) == (step, past, "m.onnx")
    assert record["omitted"] is None
    assert record["reproduces"] is True
    layout = onnx_layout(out / "m.onnx")
    inputs = [name for name in layout if name not in ("logits",) and "present" not in name]
    assert record["inputs"] == inputs
    folder = out / "m.repro"
    with np.load(folder / "step_inputs.npz") as feed, \
            np.load(folder / "step_expected.npz") as expected:
        assert list(feed.files) == inputs
        assert feed["past_key_values.0.key" if "past_key_values.0.key" in inputs
                    else "past_key_values.0.decoder.key"].shape[2] == past
        assert list(expected.files) == [*record["outputs"], "compared"]
        assert record["outputs"][0] == "logits"
        assert len(feed["input_ids"]) == len(record["rows"]) == record["batch_size"]
    done = run_repro(folder / "repro.py", out.parent)
    assert done.returncode == 1, done.stdout + done.stderr
    printed = step_printed(done.stdout)
    assert list(printed) == record["outputs"]
    measured = [row for row in result["comparisons"]
                if row["dimensions"]["step"] == step and row["batch_size"] == record["batch_size"]]
    assert [row["output"] for row in measured] == record["outputs"]
    for row in measured:  # the batch the check ran, so the figures are the check's
        at, diff, outside, total = printed[row["output"]]
        assert (at, outside, total) == (step, row["mismatched"], row["total"])
        assert diff == pytest.approx(row["max_abs_diff"], rel=1e-6)
    elsewhere = out.parent / "elsewhere" / "m.repro"
    shutil.copytree(folder, elsewhere)
    alone = run_repro(elsewhere / "repro.py", out.parent)
    assert alone.returncode == 2
    assert "put m.onnx beside m.repro/" in alone.stdout
    return record


@pytest.mark.slow
def test_a_step_outside_the_tolerance_is_localised_with_its_repro_folder(tmp_path: Path) -> None:
    """A tolerance below float32's noise: the first step fails, and it localises as any
    failing cut does (its inputs, the past included, are ordinary tensors); the repro folder
    also holds that step's whole feed, so the decoder file can be rerun at exactly that step,
    within repro-max-mb."""
    result, out = checked(tmp_path, 'factory = "models.library:llama"\natol = 1e-9\nrtol = 0\n'
                          "generate = { steps = 3 }\n")
    parity = [m for code, m in errors(result) if code == "parity-mismatch"]
    assert parity
    assert all(m.startswith("generation step 0 (past length 0)") for m in parity)
    assert result["generation"]["tokens_agree"] == [3] * 4  # noise that flips no token
    assert result["divergence"]["nodes"], result["divergence"]
    assert result["repro"]["reproduces"]
    assert (out / "m.repro" / "subgraph.onnx").exists()
    record = check_step_folder(result, out, 0, 0)
    assert record["rows"] == [0, 1, 2, 3]
    assert record["max_abs_diff"] == max(row["max_abs_diff"] for row in result["comparisons"]
                                         if row["dimensions"]["step"] == 0
                                         and row["batch_size"] == 4)
    report = (out / "m.repro" / "REPORT.md").read_text(encoding="utf-8")
    assert "## The failing generation step" in report
    assert "at generation step 0 (past length 0), keyed by its input names" in report
    comment = (out / "report.md").read_text(encoding="utf-8")
    assert "It also holds `step_inputs.npz`, the decoder file's whole feed at generation " \
           "step 0 with a past of 0" in comment
    over_repro_max_mb(tmp_path, out, record)


def over_repro_max_mb(tmp_path: Path, out: Path, record: dict) -> None:
    """The same step's arrays, written again under a smaller repro-max-mb: past it, cut to
    the failing row (the batch is axis 0 of every array), which still reproduces; past it
    again, left out, saying why."""
    import dataclasses

    from onnx_parity.settings.loading import load_settings
    from onnx_parity.verification import StepCase, step_repro
    from onnx_parity.verification.generation.checked import FailingStep

    work = tmp_path / "again"
    work.mkdir()
    shutil.copyfile(out / "m.onnx", work / "m.onnx")
    with np.load(out / "m.repro" / "step_inputs.npz") as feed, \
            np.load(out / "m.repro" / "step_expected.npz") as expected:
        failing = FailingStep(0, dict(feed), {name: expected[name] for name in record["outputs"]},
                              expected["compared"], 0)
    [spec] = load_settings(tmp_path / "repo").models
    smaller = dataclasses.replace(spec, repro_max_mb=(record["size_bytes"] - 1) / (1 << 20))
    cut = step_repro(StepCase("m", work / "m.onnx", failing), smaller, None, "none named")
    assert cut.step is not None
    assert cut.step.omitted is None
    assert len(cut.step.rows) == 1
    assert cut.step.size_bytes < record["size_bytes"]
    assert cut.found_by == "generation-step"
    assert cut.omitted == "none named"
    with np.load(work / "m.repro" / "step_inputs.npz") as feed:
        assert {len(value) for value in feed.values()} == {1}
    assert cut.step.reproduces  # the failing row: it is outside on its own
    tiny = step_repro(StepCase("m", work / "m.onnx", failing),
                      dataclasses.replace(spec, repro_max_mb=1e-6), None, "none named")
    assert tiny.step is not None
    assert tiny.step.size_bytes == 0
    assert "too large to include: over repro-max-mb = 1e-06" in (tiny.step.omitted or "")
    assert sorted(path.name for path in (work / "m.repro").iterdir()) == []


@pytest.mark.slow
def test_pytorch_failing_at_a_step_is_a_runtime_error_naming_the_step(tmp_path: Path) -> None:
    result, _ = checked(tmp_path, 'factory = "models.library:FailsOnOneToken"\n'
                        'exporter = "torchscript"\n'
                        'generate = { steps = 3, cache = "flat", cache-shape = [1, 2, 8] }\n')
    failed = [m for code, m in errors(result) if code == "runtime-error"]
    assert len(failed) == 1
    assert "this decoder takes no single token" in failed[0]
    assert "1 new token(s) after 6 past positions" in failed[0]


@pytest.mark.slow
def test_variants_of_a_generating_model_report_their_token_agreement(tmp_path: Path) -> None:
    result, out = checked(tmp_path, 'factory = "models.library:llama"\n'
                          'variants = ["int8-dynamic", "int8-static"]\n'
                          "min-top1-agreement = 0.5\ngenerate = { steps = 6 }\n")
    assert result["passed"], errors(result)
    dynamic, static = result["variants"]
    [comparison] = dynamic["comparisons"]
    assert comparison["output"] == "logits"
    assert 0.5 <= comparison["top1_agreement"] <= 1.0
    assert comparison["max_abs_diff"] > result["generation"]["max_logit_diff"][0]  # int8's own
    assert dynamic["notes"][0].startswith("checked by greedy decoding against PyTorch's fp32")
    assert (out / "m.int8-dynamic.onnx").exists()
    assert static["skipped"].startswith("int8-static is not built for a generating model")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "int8-static | — | — | — | — | not built: see its note" in report


@pytest.mark.slow
def test_stop_at_eos_stops_each_row_at_its_end_of_sequence_token(tmp_path: Path) -> None:
    result, _ = checked(tmp_path, 'factory = "models.library:llama_stopping_anywhere"\n'
                        "generate = { steps = 4, stop-at-eos = true }\n")
    assert result["passed"], errors(result)
    assert {c["dimensions"]["step"] for c in result["comparisons"]} == {0}
    assert result["generation"]["tokens_agree"] == [4] * 4  # no token differed


EXPORT_SCRIPT = '''
import sys

import torch
from transformers import DynamicCache

sys.path.insert(0, ".")
from models.library import llama  # noqa: E402

model = llama()
PAST = [f"past_key_values.{n}.{p}" for n in range(2) for p in ("key", "value")]
PRESENT = [name.replace("past_key_values", "present") for name in PAST]


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, k0, v0, k1, v1):
        cache = DynamicCache(ddp_cache_data=[(k0, v0), (k1, v1)], config=model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        return (out.logits, *[t for layer in out.past_key_values.layers
                              for t in (layer.keys, layer.values)])


past = [torch.randn(2, 2, 3, 8) for _ in PAST]
args = (torch.randint(0, 64, (2, 2)), torch.ones(2, 5, dtype=torch.int64),
        torch.tensor([[3, 4], [3, 4]]), *past)
axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"},
        **{name: {0: "batch", 2: "past"} for name in PAST},
        **{name: {0: "batch", 2: "total"} for name in PRESENT}}
torch.onnx.export(Step(), args, sys.argv[1], dynamo=False, dynamic_axes=axes,
                  input_names=["input_ids", "attention_mask", "position_ids", *PAST],
                  output_names=["logits", *PRESENT])
'''


@pytest.mark.slow
def test_the_file_an_export_command_writes_in_the_layout_is_checked(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'factory = "models.library:llama"\n'
                      'export-command = "python scripts/export_step.py {onnx}"\n'
                      "generate = { steps = 6 }\n")
    (repo / "scripts").mkdir()
    (repo / "scripts" / "export_step.py").write_text(EXPORT_SCRIPT, encoding="utf-8")
    result, _ = checked(tmp_path, "", repo)
    assert result["passed"], errors(result)
    assert result["exporter"] == "python scripts/export_step.py {onnx}"
    assert result["generation"]["tokens_agree"] == [6] * 4


@pytest.mark.slow
def test_an_export_command_file_without_the_layouts_outputs_is_a_shape_mismatch(
        tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'factory = "models.library:llama"\n'
                      'export-command = "python scripts/export_step.py {onnx}"\n'
                      "generate = { steps = 2 }\n")
    (repo / "scripts").mkdir()
    (repo / "scripts" / "export_step.py").write_text(EXPORT_SCRIPT.replace(
        'output_names=["logits", *PRESENT]', 'output_names=["logits"]'), encoding="utf-8")
    result, _ = checked(tmp_path, "", repo)
    [(code, message)] = errors(result)
    assert code == "shape-mismatch"
    assert "no output(s) ['present.0.key'" in message


# ---- the configuration: exit 2 naming the key and the fix ----

CONFIG = ('[[model]]\nname = "m"\nfactory = "models.library:llama"\n'
          'inputs = { input_ids = "ids.npy", attention_mask = "mask.npy" }\n')


def config_error(tmp_path: Path, text: str) -> str:
    from onnx_parity.settings.loading import load_settings
    from onnx_parity.settings.values import ConfigError

    (tmp_path / "onnx-parity.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    return str(raised.value)


def test_generate_is_read_into_its_settings(tmp_path: Path) -> None:
    from onnx_parity.settings import Generation
    from onnx_parity.settings.loading import load_settings

    (tmp_path / "onnx-parity.toml").write_text(
        CONFIG + 'generate = { steps = 16, stop-at-eos = true, cache = "flat", '
        "cache-shape = [2, 2, 8] }\n", encoding="utf-8")
    [spec] = load_settings(tmp_path).models
    assert spec.generate == Generation(16, True, "flat", (2, 2, 8))


@pytest.mark.parametrize(("line", "said"), [
    ("generate = 16", "expected a table"),
    ("generate = {}", "`steps` is missing"),
    ("generate = { steps = 0 }", "is not between 1 and"),
    ("generate = { steps = true }", "expected a whole number"),
    ("generate = { steps = 4, stop-at-eos = 1 }", "expected true or false"),
    ('generate = { steps = 4, cache = "paged" }', "is not a cache kind"),
    ("generate = { steps = 4, cache-shape = [2, 2, 8] }", 'applies only with cache = "flat"'),
    ('generate = { steps = 4, cache = "flat", cache-shape = [2, 8] }', "[layers, kv_heads"),
    ('generate = { steps = 4, cache = "flat", cache-shape = [2, 0, 8] }', "a size below 1"),
    ("generate = { steps = 4, temperature = 1 }", "not a key of `generate`"),
])
def test_a_bad_generate_value_names_the_key_and_the_fix(tmp_path: Path, line: str,
                                                        said: str) -> None:
    message = config_error(tmp_path, CONFIG + line + "\n")
    assert "onnx-parity.toml" in message
    assert "generate" in message
    assert said in message


@pytest.mark.parametrize("line", [
    'dynamic-axes = { input_ids = { 0 = "batch" } }',
    'outputs = ["logits"]',
    'dynamic-axes = { input_ids = { 1 = "sequence" } }\naxis-sizes = { input_ids = { 1 = [4] } }',
])
def test_keys_the_tool_decides_for_a_generating_model_are_exit_2_naming_them(
        tmp_path: Path, line: str) -> None:
    message = config_error(tmp_path, CONFIG + line + "\ngenerate = { steps = 4 }\n")
    for key in (part.split(" ")[0] for part in line.split("\n")):
        assert f"`{key}`" in message
    assert "which `generate` decides itself" in message


def test_a_generating_model_takes_prompts_only(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[[model]]\nname = "m"\nfactory = "models.library:llama"\n'
                           'inputs = { input_ids = "ids.npy" }\ngenerate = { steps = 4 }\n')
    assert "its prompts, input_ids and attention_mask" in message
    assert '"input_ids"' in message


def test_generate_in_the_cli_is_exit_2(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'factory = "models.library:llama"\n'
                      "generate = { steps = 0 }\n")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 2, run.stdout + run.stderr
    assert "generate.steps" in run.stderr + run.stdout


# ---- the pieces: positions, the token review, the record's round trip ----

def test_position_ids_are_those_of_transformers_generation() -> None:
    from onnx_parity.verification.generation.decoding import position_ids

    mask = np.array([[1, 1, 1, 1], [0, 0, 1, 1]])
    assert position_ids(mask, 4).tolist() == [[0, 1, 2, 3], [1, 1, 0, 1]]
    grown = np.concatenate([mask, np.ones((2, 1), dtype=mask.dtype)], axis=1)
    assert position_ids(grown, 1).tolist() == [[4], [2]]


def test_a_margin_below_the_tolerance_is_a_near_tie_and_a_warning() -> None:
    from onnx_parity.findings import Severity
    from onnx_parity.verification.generation.review import Miss, mismatch_finding, token_difference

    torch_logits = np.array([0.0, 3.0, 3.000004, -1.0], dtype=np.float32)
    onnx_logits = np.array([0.0, 3.000005, 3.000004, -1.0], dtype=np.float32)
    tie = token_difference(Miss(2, 1, torch_logits, onnx_logits), (1e-5, 1e-6))
    assert (tie.pytorch_token, tie.onnx_token, tie.near_tie) == (2, 1, True)
    assert mismatch_finding(tie, 8).severity == Severity.WARNING
    lifted = torch_logits + np.array([0, 0, 1, 0], dtype=np.float32)
    wide = token_difference(Miss(2, 1, lifted, onnx_logits), (1e-5, 1e-6))
    assert not wide.near_tie
    finding = mismatch_finding(wide, 8)
    assert finding.severity == Severity.ERROR
    assert finding.details["step"] == 2
    assert "step 2 of 8, batch row 1" in finding.message


def test_the_generation_record_reads_back_from_report_json() -> None:
    from onnx_parity.generation_results import GenerationResult, TokenDifference
    from onnx_parity.report.serialization import model_from_json, model_to_json
    from onnx_parity.results import ModelResult

    generation = GenerationResult(4, 2, (4, 1), TokenDifference(1, 1, 7, 5, 2e-6, 2e-6, True),
                                  (1e-7, 2e-6, 2e-6, 3e-6), 2)
    model = ModelResult(name="m", exporter="dynamo", requested_opset=18, opset=18, atol=1e-5,
                        rtol=1e-3, batch_sizes=(1,), findings=(), generation=generation)
    record = model_to_json(model)
    first = record["generation"]["first_token_difference"]
    assert first is not None
    assert first["onnx_token"] == 5
    assert model_from_json(json.loads(json.dumps(record))).generation == generation
    assert "whole_prefix" not in record["generation"]  # written only for a decoder with no cache
    rerun = dataclasses.replace(generation, whole_prefix=True)
    again = model_to_json(dataclasses.replace(model, generation=rerun))
    assert again["generation"]["whole_prefix"] is True
    assert model_from_json(json.loads(json.dumps(again))).generation == rerun
    plain = model_to_json(ModelResult(name="m", exporter=None, requested_opset=18, opset=None,
                                      atol=1e-5, rtol=1e-3, batch_sizes=(1,), findings=()))
    assert "generation" not in plain
    assert model_from_json(plain).generation is None
