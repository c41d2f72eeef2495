"""int4 variants and a quality bar on text (issue 28, section 2): `variants = ["int4"]` built by
onnxruntime's MatMulNBitsQuantizer with `[model.int4]` options, a generating model's variants
scored on `eval-tokens` (perplexity, its ratio to PyTorch fp32's, top-1 agreement) and gated by
`max-perplexity-ratio`, and an int4 token difference decoded again at accuracy_level 0.

One CLI run (module-scoped) checks two tiny seeded Llamas:
  * `grid`: every Linear weight on the symmetric int4 grid of its block of 32 (as after
    quantization-aware training), so MatMulNBits stores it exactly: at accuracy_level 0 the
    int4 file computes what fp32 does, and at the default level 4 only the kernel's int8
    activations can change a token (an outlier channel makes them lose precision). int4 at the defaults and fp16, scored on a padded `.npz`.
  * `plain`: random weights, int4 at `accuracy-level = 0`, scored on PyTorch fp32's own greedy
    text with `max-perplexity-ratio = 1`, so any loss the 4-bit weights cause fails it.
"""

from __future__ import annotations

import importlib.util
import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_repo.harness import left_padded_prompts, run_cli, write_model_repo
from onnx_parity.settings.loading import load_settings
from onnx_parity.settings.values import ConfigError

MODELS = '''
import torch


def llama(vocab_size=64):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)).eval()


def llama_on_int4_grid():
    """Each block of 32 weights along a Linear's inputs is q * scale with q in -8..7 and one
    q = -8: the symmetric int4 code of that block, which MatMulNBits stores exactly. Channel 0
    of every norm is an outlier (weight 30, as LLMs' massive activations), which int8
    activations quantized per block of 32 lose precision on; 512 tokens make near-ties common."""
    model = llama(512)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter[0] = 30.0
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                blocks = module.weight.reshape(module.weight.shape[0], -1, 32)
                scale = blocks.abs().amax(-1, keepdim=True) / 8
                codes = torch.clamp(torch.round(blocks / scale), -8, 7)
                codes[..., 0] = -8
                module.weight.copy_((codes * scale).reshape(module.weight.shape))
    return model
'''

ENTRY = '''
[[model]]
name = "{name}"
factory = "models.library:{factory}"
inputs = {{ input_ids = "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }}
generate = {{ steps = 6 }}
'''
CONFIG = ("batch-sizes = [1, 4]\n"
          + ENTRY.format(name="grid", factory="llama_on_int4_grid")
          + 'variants = ["int4", "fp16"]\neval-tokens = "samples/text.npz"\n'
          + "max-perplexity-ratio = 2\n"
          + ENTRY.format(name="plain", factory="llama")
          + 'variants = ["int4"]\neval-tokens = "samples/greedy.npy"\nmax-perplexity-ratio = 1\n'
          + "[model.int4]\naccuracy-level = 0\n")


def prompts() -> dict[str, np.ndarray]:
    return left_padded_prompts(6)


def greedy_text(repo: Path) -> np.ndarray:
    """PyTorch fp32's own greedy continuation of 4 random tokens, 24 tokens a row: the text the
    model is surest of, so quantization noise can only lose likelihood on average."""
    import torch

    spec = importlib.util.spec_from_file_location("int4_models", repo / "models" / "library.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    start = torch.from_numpy(np.random.default_rng(2).integers(3, 64, (4, 1)))
    with torch.no_grad():
        out = module.llama().generate(start, do_sample=False, max_new_tokens=23,
                                      min_new_tokens=23, pad_token_id=0)
    return np.asarray(out.numpy(), dtype=np.int64)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    root = tmp_path_factory.mktemp("int4")
    repo = write_model_repo(root, ("library", MODELS), prompts(), CONFIG)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 64, (4, 24))
    mask = np.ones_like(ids)
    mask[1, :5] = 0  # left padding
    mask[2, -4:] = 0  # right padding
    np.savez(repo / "samples" / "text.npz", input_ids=ids, attention_mask=mask)
    np.save(repo / "samples" / "greedy.npy", greedy_text(repo))
    run = run_cli("check", cwd=repo, out=root / "out")
    assert run.code in (0, 1), run.stdout + run.stderr
    models = {model["name"]: model for model in run.report()["models"]}
    return models, (root / "out" / "report.md").read_text(encoding="utf-8"), root / "out"


def variant(model: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in model["variants"] if v["name"] == name)


def findings(model: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in model["findings"] if f["code"] == code]


@pytest.mark.slow
def test_int4_is_built_as_matmulnbits_at_the_configured_accuracy_level(checked: Any) -> None:
    import onnx

    models, _, out = checked
    for name, level in (("grid", 4), ("plain", 0)):
        int4 = variant(models[name], "int4")
        assert int4["settings"]["block_size"] == 32
        assert int4["settings"]["symmetric"] is True
        assert int4["settings"]["accuracy_level"] == level
        assert int4["size_bytes"] < int4["fp32_size_bytes"]
        assert int4["file"] == f"{name}.int4.onnx"
        graph = onnx.load(str(out / int4["file"])).graph
        nodes = [n for n in graph.node if n.op_type == "MatMulNBits"]
        assert len(nodes) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the head
        levels = {next((a.i for a in n.attribute if a.name == "accuracy_level"), 0)
                  for n in nodes}
        assert levels == {level}


@pytest.mark.slow
def test_each_variant_reports_perplexity_beside_pytorch_fp32(checked: Any) -> None:
    models, _, _ = checked
    grid = models["grid"]
    for name in ("int4", "fp16"):
        text = variant(grid, name)["text"]
        assert text["file"] == "samples/text.npz"
        assert text["rows"] == 4
        # Every text token after a row's first: 23 + 18 + 19 + 23 (rows 1 and 2 are padded).
        assert text["tokens"] == 83
        assert math.isclose(text["perplexity"], math.exp(text["nll"]))
        assert math.isclose(text["fp32_perplexity"], math.exp(text["fp32_nll"]))
        assert math.isclose(text["perplexity_ratio"], text["perplexity"] / text["fp32_perplexity"])
        assert 0.0 <= text["top1_agreement"] <= 1.0
    fp16, int4 = variant(grid, "fp16")["text"], variant(grid, "int4")["text"]
    assert fp16["fp32_nll"] == int4["fp32_nll"]  # PyTorch scored once, for both
    assert abs(math.log(fp16["perplexity_ratio"])) < abs(math.log(int4["perplexity_ratio"]))
    assert grid["passed"]


@pytest.mark.slow
def test_a_ratio_past_max_perplexity_ratio_is_variant_degraded_with_its_figures(
        checked: Any) -> None:
    models, _, _ = checked
    plain = models["plain"]
    text = variant(plain, "int4")["text"]
    assert text["perplexity_ratio"] > 1.0
    [degraded] = findings(plain, "variant-degraded")
    assert degraded["severity"] == "error"
    assert degraded["details"]["variant"] == "int4"
    assert degraded["details"]["misses"][0]["figure"] == "perplexity_ratio"
    assert degraded["details"]["misses"][0]["value"] == text["perplexity_ratio"]
    assert f"{text['perplexity_ratio']:.4f}x > `max-perplexity-ratio` 1" in degraded["message"]
    assert "samples/greedy.npy" in degraded["message"]
    assert not plain["passed"]


@pytest.mark.slow
def test_an_int4_token_difference_names_its_cause_from_the_level_0_rerun(checked: Any) -> None:
    models, _, _ = checked
    # On the int4 grid the weights are exact: a token level 4 changes, level 0 keeps.
    [kernel] = findings(models["grid"], "int4-token-difference")
    assert kernel["severity"] == "note"
    assert kernel["details"]["cause"] == "int8-activations"
    assert kernel["details"]["level0_first_difference"] is None
    assert kernel["message"].startswith("int4 (accuracy_level 4): the greedy token differs")
    assert ("Decoded again with the same weights at accuracy_level 0, that step picks "
            "PyTorch's token: the difference is the kernel's int8 activations") in kernel["message"]
    # At level 0 the activations are fp32 already: the 4-bit weights chose the token.
    [weights] = findings(models["plain"], "int4-token-difference")
    assert weights["details"]["cause"] == "weights"
    assert "the difference is the quantization of the weights to 4 bits" in weights["message"]


@pytest.mark.slow
def test_the_variants_table_shows_token_agreement_and_perplexity(checked: Any) -> None:
    models, report, _ = checked
    assert "#### Text quality (`eval-tokens`)" in report
    grid = models["grid"]
    int4 = variant(grid, "int4")
    text = int4["text"]
    agreement = int4["comparisons"][0]["top1_agreement"]
    assert (f"| ✅ | `grid` | int4 | {agreement:.1%} | {text['nll']:.4f} | "
            f"{text['perplexity']:.4g} | {text['perplexity_ratio']:.3f}x | "
            f"{text['top1_agreement']:.1%} |") in report
    assert (f"|  | `grid` | fp32 (PyTorch) | — | {text['fp32_nll']:.4f} | "
            f"{text['fp32_perplexity']:.4g} | 1.000x | — |") in report
    assert "| ❌ | `plain` | int4 |" in report


MLP = '''
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                               torch.nn.Linear(128, 10)).eval()


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def scale():
    return Scale().eval()
'''


PLAIN = """
[[model]]
name = "{name}"
factory = "models.plain:{name}"
inputs = {{ x = "samples/x.npy" }}
dynamic-axes = {{ x = {{ 0 = "batch" }} }}
variants = ["int4"]
min-sqnr-db = 10
[model.int4]
block-size = 16
"""


@pytest.mark.slow
def test_a_plain_models_int4_is_compared_output_by_output(tmp_path: Path) -> None:
    """One run: an MLP (its Linears on a 2-D input are exported as Gemm, rewritten as MatMul
    before quantizing) built and compared, and a model without weights: a variant-error."""
    import onnx

    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    repo = write_model_repo(tmp_path, ("plain", MLP), {"x": x},
                            PLAIN.format(name="mlp") + PLAIN.format(name="scale"))
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    models = {model["name"]: model for model in run.report()["models"]}
    assert models["mlp"]["passed"]
    [int4] = models["mlp"]["variants"]
    assert int4["settings"]["block_size"] == 16
    assert {c["batch_size"] for c in int4["comparisons"]} == {1, 4}
    assert all(10 <= c["sqnr_db"] < math.inf for c in int4["comparisons"])
    graph = onnx.load(str(tmp_path / "out" / int4["file"])).graph
    assert [n.op_type for n in graph.node].count("MatMulNBits") == 2
    assert "Gemm" not in {n.op_type for n in graph.node}
    assert int4["text"] is None  # text scores are a generating model's
    [error] = findings(models["scale"], "variant-error")
    assert error["message"].startswith("int4 could not be built: NothingToQuantize: "
                                       "MatMulNBitsQuantizer found no MatMul or Gemm with a "
                                       "constant weight to make 4-bit")
    assert models["scale"]["variants"][0]["size_bytes"] is None


# --- configuration -------------------------------------------------------------------------------

BASE = '''
[[model]]
name = "m"
factory = "models.library:llama"
inputs = { input_ids = "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }
generate = { steps = 2 }
'''


def failure(tmp_path: Path, extra: str) -> str:
    (tmp_path / "onnx-parity.toml").write_text(BASE + textwrap.dedent(extra), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    return str(raised.value)


@pytest.mark.parametrize(("extra", "expected"), [
    ("[model.int4]\nblock-size = 24\n",
     'key "int4.block-size": 24 is not a power of 2 from 16 to 256'),
    ("[model.int4]\nblock-size = 8\n", "8 is not a power of 2 from 16 to 256"),
    ('[model.int4]\nblock-size = "32"\n', 'expected a power of 2 from 16 to 256, e.g. '
     'block-size = 32; got a string "32"'),
    ('[model.int4]\nsymmetric = "yes"\n', 'key "int4.symmetric": expected true'),
    ("[model.int4]\naccuracy-level = 5\n", "5 is not a MatMulNBits accuracy_level. Write 4"),
    ("[model.int4]\nblocksize = 32\n", 'key "int4.blocksize": not a key of `int4`; its keys '
     "are block-size, symmetric, accuracy-level"),
    ("int4 = 4\n", 'key "int4": expected a table, e.g. int4 = { block-size = 32'),
    ("max-perplexity-ratio = 0.9\n", "0.9 is below 1"),
    ('eval-tokens = "samples/text.txt"\n', 'is not a .npy or .npz file'),
])
def test_bad_int4_and_text_keys_are_config_errors_naming_the_key(
        tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in failure(tmp_path, extra)


def test_eval_tokens_needs_a_generating_model(tmp_path: Path) -> None:
    text = BASE.replace("generate = { steps = 2 }\n", 'eval-tokens = "samples/t.npy"\n')
    (tmp_path / "onnx-parity.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="applies to a generating model only"):
        load_settings(tmp_path)


def test_int4_defaults_are_onnxruntime_genais_cpu_defaults(tmp_path: Path) -> None:
    (tmp_path / "onnx-parity.toml").write_text(
        'variants = ["int4"]\n' + BASE + "[model.int4]\nblock-size = 64\n", encoding="utf-8")
    [model] = load_settings(tmp_path).models
    assert (model.int4.block_size, model.int4.symmetric, model.int4.accuracy_level) == (
        64, True, 4)
    assert model.variants == ("int4",)
    assert model.max_perplexity_ratio == 1.1


def test_a_bad_int4_table_ends_the_cli_with_exit_2(tmp_path: Path) -> None:
    repo = write_model_repo(tmp_path, ("library", MODELS), prompts(),
                            BASE + "[model.int4]\naccuracy-level = 7\n")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 2
    assert "7 is not a MatMulNBits accuracy_level" in run.stdout + run.stderr
    assert "Traceback" not in run.stderr


# --- eval-tokens files -------------------------------------------------------------------------


@pytest.mark.parametrize(("arrays", "expected"), [
    ({"ids": np.zeros((2, 4), dtype=np.int64)}, "holds no `input_ids` (it holds ids)"),
    ({"input_ids": np.arange(8)}, "holds int64 ids of shape [8], not integer token ids"),
    ({"input_ids": np.full((2, 4), 70)}, "holds ids from 70 to 70, outside the model's "
     "vocabulary of 64"),
    ({"input_ids": np.ones((2, 4), dtype=np.int64),
      "attention_mask": np.full((2, 4), 2)}, "has an attention_mask of shape [2, 4] that is "
     "not 0/1"),
    ({"input_ids": np.ones((2, 4), dtype=np.int64),
      "attention_mask": np.eye(2, 4, dtype=np.int64)}, "has no row of 2 or more tokens"),
])
def test_a_bad_eval_tokens_file_is_a_load_error_naming_the_file_and_key(
        tmp_path: Path, arrays: dict[str, Any], expected: str) -> None:
    from onnx_parity.models import load_eval_tokens
    from onnx_parity.models.load_errors import SampleError

    (tmp_path / "samples").mkdir()
    np.savez(tmp_path / "samples" / "text.npz", **arrays)
    with pytest.raises(SampleError) as raised:
        load_eval_tokens(tmp_path / "samples" / "text.npz", tmp_path, 64)
    assert str(raised.value).startswith("Sample file samples/text.npz (config key "
                                        "`eval-tokens`) ")
    assert expected in str(raised.value)


def test_an_eval_tokens_npy_is_every_position_text(tmp_path: Path) -> None:
    from onnx_parity.models import load_eval_tokens

    ids = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.save(tmp_path / "ids.npy", ids)
    text = load_eval_tokens(tmp_path / "ids.npy", tmp_path, 64)
    assert text.ids.dtype == np.int64
    assert (text.ids == ids).all()
    assert (text.mask == 1).all()
    assert text.file == "ids.npy"
    assert len(text.sha256) == 64
