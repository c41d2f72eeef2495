"""Shared fixtures: a small repository of real models and samples, checked for real."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

MODEL_REPO = Path(__file__).parent / "model_repo"
REPO_ROOT = Path(__file__).resolve().parent.parent


def write_samples(repo: Path) -> None:
    rng = np.random.default_rng(0)
    samples = repo / "samples"
    samples.mkdir(exist_ok=True)
    np.save(samples / "x.npy", rng.standard_normal((4, 12)).astype(np.float32))
    np.save(samples / "positive.npy", rng.uniform(1, 2, (4, 12)).astype(np.float32))
    mixed = np.concatenate([rng.uniform(1, 2, (2, 12)), rng.uniform(-3, -2, (2, 12))])
    np.save(samples / "mixed.npy", mixed.astype(np.float32))
    np.save(samples / "ids.npy", rng.integers(0, 50, (4, 6)).astype(np.int64))
    np.save(samples / "mask.npy", (rng.random((4, 6)) > 0.3).astype(np.int64))


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo") / "model-repo"
    shutil.copytree(MODEL_REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    write_samples(repo)
    return repo


@pytest.fixture
def check_model(model_repo: Path, tmp_path: Path) -> Callable[..., object]:
    """Write a one-model configuration and run that model in this process."""
    from onnx_parity.pipeline.one_model import run_in_process
    from onnx_parity.settings.loading import load_settings

    def run(config: str) -> object:
        path = model_repo / "configs" / f"{tmp_path.name}.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(config, encoding="utf-8")
        settings = load_settings(model_repo, path)
        return run_in_process(settings.models[0], model_repo, tmp_path)

    return run
