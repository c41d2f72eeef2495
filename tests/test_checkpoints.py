"""`transformers = "folder"`: a save_pretrained folder built as the model, offline, through the
real CLI on fresh repositories; and the folders that must not load (missing, pickled weights
only, remote code), each a load-error naming the folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import run_cli
from onnx_parity.models import checkpoint_classes
from onnx_parity.pipeline.cache.fingerprint import input_files
from onnx_parity.settings import load_settings
from onnx_parity.settings.values import ConfigError

FOLDER = "checkpoints/tiny-llama"
CONFIG = f'''batch-sizes = [1, 2]
[[model]]
name = "llama"
transformers = "{FOLDER}"
inputs = {{ input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy" }}
outputs = ["logits"]
dynamic-axes = {{ input_ids = {{ 0 = "batch", 1 = "sequence" }}, attention_mask = {{ 0 = "batch", 1 = "sequence" }}, logits = {{ 0 = "batch", 1 = "sequence" }} }}
axis-sizes = {{ input_ids = {{ 1 = [6, 3] }} }}
'''
# Offline as a CI runner without a network: any reach for the hub would fail.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": "/nonexistent/hf"}


def tiny_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=64, use_cache=False)
    return LlamaForCausalLM(config).eval()


def write_repo(root: Path, config: str = CONFIG) -> Path:
    repo = root / "repo"
    (repo / "samples").mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "ids.npy", rng.integers(0, 64, (2, 6)).astype(np.int64))
    np.save(repo / "samples" / "mask.npy", np.ones((2, 6), np.int64))
    (repo / "onnx-parity.toml").write_text(config, encoding="utf-8")
    return repo


def save_checkpoint(repo: Path) -> Path:
    folder = repo / FOLDER
    tiny_llama().save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_save_pretrained_folder_is_built_and_passes_offline(tmp_path: Path) -> None:
    repo = write_repo(tmp_path)
    folder = save_checkpoint(repo)
    assert sorted(path.suffix for path in folder.iterdir()) == [".json", ".json", ".safetensors"]
    run = run_cli("check", cwd=repo, out=tmp_path / "out", env=OFFLINE)
    assert run.code == 0, run.stdout + run.stderr
    model = run.models()["llama"]
    assert model["passed"], model["findings"]
    assert model["exporter"] == "dynamo"
    assert model["dimension_sizes"] == {"sequence": [6, 3]}
    assert model["max_abs_diff"] < 1e-4
    log = (tmp_path / "out" / "llama.log").read_text(encoding="utf-8")
    assert f'transformers folder "{FOLDER}" built with transformers.LlamaForCausalLM' in log


def test_the_cache_sees_every_file_of_the_folder(tmp_path: Path) -> None:
    repo = write_repo(tmp_path)
    folder = repo / FOLDER
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (folder / name).write_text("{}", encoding="utf-8")
    [spec] = load_settings(repo).models
    assert spec.factory is None
    assert {path.name for path in input_files(spec)} >= {
        "config.json", "model.safetensors", "generation_config.json"}


def test_the_zygote_pre_imports_the_class_the_config_names(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert checkpoint_classes(tmp_path) == ("LlamaForCausalLM",)
    (tmp_path / "config.json").write_text("{}")
    assert checkpoint_classes(tmp_path) == ("AutoModel",)
    assert checkpoint_classes(tmp_path / "missing") == ()


def load_error(tmp_path: Path, repo: Path) -> dict:
    run = run_cli("check", cwd=repo, out=tmp_path / "out", env=OFFLINE)
    assert run.code == 1, run.stdout + run.stderr
    [finding] = run.models()["llama"]["findings"]
    assert finding["code"] == "load-error"
    assert f'transformers folder "{FOLDER}"' in finding["message"]
    return finding


@pytest.mark.slow
def test_a_missing_folder_is_a_load_error_naming_it(tmp_path: Path) -> None:
    finding = load_error(tmp_path, write_repo(tmp_path))
    assert finding["message"] == f'transformers folder "{FOLDER}" does not exist.'
    assert "correct `transformers`" in finding["fix"]


@pytest.mark.slow
def test_pickled_weights_only_are_refused_and_never_unpickled(tmp_path: Path) -> None:
    import torch

    repo = write_repo(tmp_path)
    folder = save_checkpoint(repo)
    marker = tmp_path / "unpickled"
    state = {"payload": Payload(marker)}
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    finding = load_error(tmp_path, repo)
    assert "holds pickled weights only (pytorch_model.bin)" in finding["message"]
    assert "save_pretrained(folder)" in finding["fix"]
    assert not marker.exists()


class Payload:
    """Unpickling this would create `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return os.system, (f"touch '{self.marker}'",)


@pytest.mark.slow
def test_a_folder_that_needs_remote_code_is_refused(tmp_path: Path) -> None:
    repo = write_repo(tmp_path)
    folder = save_checkpoint(repo)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_evil.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    finding = load_error(tmp_path, repo)
    assert "needs remote code" in finding["message"]
    assert "modeling_evil.EvilForCausalLM" in finding["message"]
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(("extra", "expected"), [
    ('factory = "models.net:build"\n', "sets both `factory` and `transformers`"),
    ('weights = "weights/w.pt"\n', "`weights` does not apply to a `transformers` folder"),
])
def test_factory_or_weights_beside_a_folder_is_exit_2(tmp_path: Path, extra: str,
                                                      expected: str) -> None:
    repo = write_repo(tmp_path, CONFIG + extra)
    with pytest.raises(ConfigError, match=expected):
        load_settings(repo)
    run = run_cli("check", cwd=repo)
    assert run.code == 2
    assert expected in run.stderr + run.stdout
