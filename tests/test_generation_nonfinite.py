"""A NaN or an infinity in a generating model's figures never costs the run (issue 34, §4).

Before, one decoder whose logits onnxruntime made infinite ended `onnx-parity check` with exit
3 and no report.json ("Out of range float values are not JSON compliant: nan"), losing every
other model's result. One real CLI run of three tiny seeded decoders: one whose export makes
its logits -inf where PyTorch's are finite, a Llama whose own logits are NaN (PyTorch computes
them, onnxruntime the same), and a plain Llama; then the same run again from the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def llama_nan():
    """Rows 5 to 8 of the head infinite: those logits are NaN or infinite in PyTorch itself."""
    model = llama()
    with torch.no_grad():
        model.lm_head.weight[5:9] = float("inf")
    return model


class LogOfPosition(torch.nn.Module):
    """One attention layer with a flat cache whose logits add log(position). TorchScript bakes
    the prompt pass's branch (positions from 0) into the one-token step, so onnxruntime's
    log(0) makes every logit -inf from step 1 where PyTorch's are finite; the last vocabulary
    entry is masked to -inf on both sides (an infinity PyTorch computes too)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(64, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 64)

    def forward(self, input_ids, attention_mask, key, value):
        b, s = input_ids.shape
        if s > 1:
            positions = torch.arange(s).expand(b, s)
        else:
            positions = torch.full((b, 1), int(key.shape[2]))
        q, k, v = (t.reshape(b, s, 2, 8).transpose(1, 2)
                   for t in self.qkv(self.embed(input_ids)).chunk(3, -1))
        k, v = torch.cat([key, k], 2), torch.cat([value, v], 2)
        t = k.shape[2]
        allowed = torch.arange(t)[None, :] <= (torch.arange(s) + (t - s))[:, None]
        allowed = allowed[None, None] & (attention_mask[:, None, None, :] > 0)
        scores = (q @ k.transpose(2, 3) / 8 ** 0.5).masked_fill(~allowed, -1e4)
        h = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 16)
        logits = self.out(h) + torch.log(positions.float())[..., None]
        logits[..., 63] = float("-inf")
        return logits, k, v
'''

INPUTS = ('inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
          '"samples/attention_mask.npy" }\n')
CONFIG = ('[[model]]\nname = "baked"\nfactory = "models.library:LogOfPosition"\n' + INPUTS
          + 'exporter = "torchscript"\n'
          'generate = { steps = 4, cache = "flat", cache-shape = [1, 2, 8] }\n'
          '[[model]]\nname = "own-nan"\nfactory = "models.library:llama_nan"\n' + INPUTS
          + "generate = { steps = 4 }\n"
          '[[model]]\nname = "plain"\nfactory = "models.library:llama"\n' + INPUTS
          + "generate = { steps = 4 }\n")


def codes(model: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["severity"]) for f in model["findings"]]


@pytest.mark.slow
def test_nonfinite_logits_keep_the_report_and_every_other_models_result(
        tmp_path: Path) -> None:
    repo = write_model_repo(tmp_path, ("library", MODELS), left_padded_prompts(6), CONFIG)
    cache = tmp_path / "cache"
    run = run_cli("check", "--jobs", "1", "--cache", str(cache), cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    assert "internal error" not in run.stderr
    models = run.models()
    assert list(models) == ["baked", "own-nan", "plain"]
    assert run.report()["failed_models"] == ["baked"]

    baked = models["baked"]
    generation = baked["generation"]
    assert generation["max_logit_diff"][1:] == ["inf"] * 3  # strict JSON: the documented text
    assert generation["first_token_difference"]["step"] == 1
    assert generation["first_token_difference"]["logit_diff"] == "inf"
    [nonfinite] = [f for f in baked["findings"] if f["code"] == "nan-or-inf"]
    assert nonfinite["severity"] == "error"
    assert nonfinite["message"].startswith("generation step 1 (past length 6)")
    # whose infinity it is: 63 of the 64 logits per row are onnxruntime's alone, the masked
    # entry PyTorch's own (4 rows)
    assert "252 value(s) NaN or infinite on one side only" in nonfinite["message"]
    assert "PyTorch itself computes 0 NaN and 4 infinite value(s) there" in nonfinite["message"]
    assert ("generation-mismatch", "error") in codes(baked)

    own = models["own-nan"]
    assert own["passed"]
    [warning] = [f for f in own["findings"] if f["code"] == "nan-or-inf"]
    assert warning["severity"] == "warning"
    assert "PyTorch itself computes" in warning["message"]
    assert "at generation step 0" in warning["message"]
    assert models["plain"]["passed"]
    assert codes(models["plain"]) == []

    out = run.folder
    assert "| Max logit diff | " in (out / "report.md").read_text(encoding="utf-8")
    assert "max logit diff inf at step 1" in run.stdout
    json.loads((out / "report.sarif").read_text(encoding="utf-8"))
    assert "nan-or-inf" in (out / "report.junit.xml").read_text(encoding="utf-8")
    for name in models:
        assert (out / f"{name}.parity.json").is_file()

    again = run_cli("check", "--jobs", "1", "--cache", str(cache), cwd=repo,
                    out=tmp_path / "again")
    assert again.code == 1, again.stdout + again.stderr
    cached = again.models()
    assert cached["baked"]["cached"]
    assert cached["plain"]["cached"]
    assert cached["baked"]["generation"] == generation
    assert cached["baked"]["findings"] == baked["findings"]
