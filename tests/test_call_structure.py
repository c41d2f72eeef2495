"""Models as libraries call them: constant keyword arguments (`forward-kwargs`), dotted inputs
bound into a dict or a transformers cache, and outputs of any structure, named (issue 21).

Each end-to-end test writes a fresh repository (a tiny diffusers UNet, a tiny transformers
Llama, a hand-written model taking a dict; seeded random weights, offline) and runs the real CLI.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import run_cli

MODELS = '''
import torch


def unet():
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=8).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


class Conditioned(torch.nn.Module):
    """Takes its conditioning as a dict, as SDXL's UNet takes `added_cond_kwargs`."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(6, 6)
        self.text = torch.nn.Linear(4, 6)

    def forward(self, x, added_cond_kwargs, scale=1.0):
        bias = self.text(added_cond_kwargs["text_embeds"]) * added_cond_kwargs["time_ids"]
        return {"sample": self.proj(x) * scale + bias, "bias": bias}
'''


def write_repo(root: Path, model: str, samples: dict[str, np.ndarray]) -> Path:
    """A repository holding models/library.py, the samples and `model` (a [[model]] body)."""
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "library.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    for name, array in samples.items():
        np.save(repo / "samples" / f"{name}.npy", array)
    inputs = ", ".join(f'"{name}" = "samples/{name}.npy"' for name in samples)
    (repo / "onnx-parity.toml").write_text(
        f"batch-sizes = [1, 2]\n[[model]]\nname = \"m\"\ninputs = {{ {inputs} }}\n"
        f"{textwrap.dedent(model)}", encoding="utf-8")
    return repo


def checked(tmp_path: Path, model: str, samples: dict[str, np.ndarray]) -> tuple[dict, Path]:
    """The model checked through the CLI: its report.json entry and the exported ONNX file."""
    repo = write_repo(tmp_path, model, samples)
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    assert run.code in (0, 1), run.stdout + run.stderr
    return result, tmp_path / "out" / "m.onnx"


def failures(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def onnx_names(path: Path) -> tuple[list[str], list[str]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [value.name for value in graph.input], [value.name for value in graph.output]


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def unet_samples() -> dict[str, np.ndarray]:
    r = rng()
    return {"sample": r.standard_normal((2, 4, 8, 8)).astype(np.float32),
            "timestep": np.array([10, 500], dtype=np.int64),
            "encoder_hidden_states": r.standard_normal((2, 5, 32)).astype(np.float32)}


UNET = '''factory = "models.library:unet"
dynamic-axes = { sample = { 0 = "batch" }, timestep = { 0 = "batch" }, encoder_hidden_states = { 0 = "batch" } }
'''


@pytest.mark.slow
def test_a_diffusers_unet_returning_its_output_object_passes_with_its_output_named_sample(
        tmp_path: Path) -> None:
    result, onnx_file = checked(tmp_path, UNET, unet_samples())
    assert result["passed"], failures(result)
    assert {c["output"] for c in result["comparisons"]} == {"sample"}
    assert onnx_names(onnx_file) == (["sample", "timestep", "encoder_hidden_states"], ["out_sample"])


@pytest.mark.slow
def test_a_diffusers_unet_called_with_return_dict_false_passes(tmp_path: Path) -> None:
    result, onnx_file = checked(tmp_path, UNET + "forward-kwargs = { return_dict = false }\n",
                                unet_samples())
    assert result["passed"], failures(result)
    # a tuple keeps today's names: the report's by place, the graph's the exporter's own
    assert {c["output"] for c in result["comparisons"]} == {"0"}
    inputs, _ = onnx_names(onnx_file)
    assert inputs == ["sample", "timestep", "encoder_hidden_states"]  # the constant is no input
    parity = json.loads((tmp_path / "out" / "m.parity.json").read_text(encoding="utf-8"))
    assert parity["forward_kwargs"] == {"return_dict": False}
