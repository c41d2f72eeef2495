"""bf16 and fp16 models, `dtype`, bf16 samples, and `compare-mask`, through the real CLI on a
repository the test writes: a tiny transformers Llama (seeded weights, `use_cache=False`, so
forward returns logits only) and a weightless model that concatenates bf16 samples."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, run_cli

MODELS = '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def llama():
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                         max_position_embeddings=64, use_cache=False)
    return LlamaForCausalLM(config).eval()


def llama_bf16():
    return llama().to(torch.bfloat16)


def llama_fp16():
    return llama().to(torch.float16)


class Widen(torch.nn.Module):
    """bf16 in, bf16 and float32 out: the bf16 operators onnxruntime's CPU provider has."""

    def forward(self, x):
        return torch.cat([x, x], dim=1), x.float() * 2


def widen():
    return Widen()
'''

LLAMA_AXES = ('dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, '
              'attention_mask = { 0 = "batch", 1 = "sequence" }, '
              'logits = { 0 = "batch", 1 = "sequence" } }\n')


def _llama(name: str, factory: str, extra: str = "", mask: str = "samples/mask.npy") -> str:
    return (f'[[model]]\nname = "{name}"\nfactory = "models.llama:{factory}"\n'
            f'inputs = {{ input_ids = "samples/ids.npy", attention_mask = "{mask}" }}\n'
            f'outputs = ["logits"]\n{LLAMA_AXES}{extra}')


CONFIG = "\n".join([
    _llama("bf16", "llama_bf16"),
    _llama("bf16-as-fp32", "llama_bf16", 'dtype = "float32"\n'),
    _llama("fp16", "llama_fp16"),
    _llama("padded", "llama", mask="samples/left-padded.npy"),
    _llama("padded-masked", "llama", 'compare-mask = { logits = "attention_mask" }\n',
           mask="samples/left-padded.npy"),
    '[[model]]\nname = "bf16-samples"\nfactory = "models.llama:widen"\n'
    'inputs = { x = "samples/x-bf16.pt" }\ndynamic-axes = { x = { 0 = "batch" } }\n',
])


def write_repo(root: Path) -> Path:
    import torch

    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "llama.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "ids.npy", rng.integers(0, 64, (4, 8)).astype(np.int64))
    np.save(repo / "samples" / "mask.npy", np.ones((4, 8), np.int64))
    # A generation server's batch: prompts of 8, 6, 5 and 3 tokens, padded on the left.
    pads = np.arange(8)[None, :] >= np.array([0, 2, 3, 5])[:, None]
    np.save(repo / "samples" / "left-padded.npy", pads.astype(np.int64))
    torch.save({"x": torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
                .to(torch.bfloat16)}, repo / "samples" / "x-bf16.pt")
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    return repo


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("dtypes")
    return run_cli("check", cwd=write_repo(root), out=root / "out")


def codes(model: dict) -> list[str]:
    return [f["code"] for f in model["findings"] if f["severity"] == "error"]


@pytest.mark.slow
def test_a_bf16_llama_gets_runtime_unsupported_naming_the_operator(checked: CliRun) -> None:
    model = checked.models()["bf16"]
    assert codes(model) == ["runtime-unsupported"], model["findings"]
    [finding] = model["findings"]
    details = finding["details"]
    assert details["dtype"] == "bfloat16"
    assert details["operator"] in ("Mul", "Add", "MatMul", "Gemm", "Softmax", "Sigmoid",
                                   "ReduceMean", "Where", "Neg", "Pow", "Sqrt")
    assert f"no kernel for {details['operator']} " in finding["message"]
    assert "at bfloat16" in finding["message"]
    assert 'dtype = "float32"' in finding["fix"]
    assert "fp16" in finding["fix"]


@pytest.mark.slow
def test_the_same_bf16_llama_with_dtype_float32_passes(checked: CliRun) -> None:
    model = checked.models()["bf16-as-fp32"]
    assert model["passed"], model["findings"]
    assert (model["atol"], model["rtol"]) == (1e-5, 1e-4)  # float32's defaults
    assert {c["torch_dtype"] for c in model["comparisons"]} == {"float32"}


@pytest.mark.slow
def test_an_fp16_llama_is_checked_at_fp16_tolerances(checked: CliRun) -> None:
    model = checked.models()["fp16"]
    assert model["passed"], model["findings"]
    assert (model["atol"], model["rtol"]) == (1e-3, 1e-2)
    assert {(c["torch_dtype"], c["onnx_dtype"]) for c in model["comparisons"]} == {
        ("float16", "float16")}
    # float32's tolerance would not hold what float16 keeps: the widening is needed.
    worst = max(c["max_abs_diff"] for c in model["comparisons"])
    assert 1e-5 < worst < 1e-3


@pytest.mark.slow
def test_a_bf16_pt_sample_is_fed_to_onnxruntime_as_bf16(checked: CliRun) -> None:
    model = checked.models()["bf16-samples"]
    assert model["passed"], model["findings"]
    dtypes = {c["output"]: (c["torch_dtype"], c["onnx_dtype"]) for c in model["comparisons"]}
    assert dtypes == {"0": ("bfloat16", "bfloat16"), "1": ("float32", "float32")}
    assert {c["max_abs_diff"] for c in model["comparisons"]} == {0.0}


@pytest.mark.slow
def test_a_left_padded_batch_fails_without_compare_mask(checked: CliRun) -> None:
    model = checked.models()["padded"]
    assert "parity-mismatch" in codes(model), model["findings"]
    assert all(c["left_out"] == 0 for c in model["comparisons"])


@pytest.mark.slow
def test_with_compare_mask_it_passes_and_says_what_it_left_out(checked: CliRun) -> None:
    model = checked.models()["padded-masked"]
    assert model["passed"], model["findings"]
    committed = [c for c in model["comparisons"]
                 if c["batch_size"] == 4 and c["dimensions"] == {"sequence": 8}]
    assert committed, model["comparisons"]
    for c in committed:
        # 0 + 2 + 3 + 5 padded positions, each a row of 64 logits.
        assert (c["left_out"], c["left_out_by"]) == (10 * 64, "attention_mask")
        assert c["total"] == 4 * 8 * 64 - 10 * 64
    left_out = sum(c["left_out"] for c in model["comparisons"])
    compared = sum(c["total"] for c in model["comparisons"])
    markdown = (checked.folder / "report.md").read_text(encoding="utf-8")
    assert (f"`padded-masked` compared `logits` only where `attention_mask` is not 0 "
            f"(`compare-mask`): {left_out:,} of {left_out + compared:,} elements left out."
            ) in markdown
    [line] = [line for line in checked.stdout.splitlines() if " padded-masked " in line]
    assert f"({left_out:,} left out)" in line
