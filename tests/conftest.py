"""Shared fixtures: the fixture repository of real models and samples, checked for real."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fixture_repo.harness import copy_repo, write_samples


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = copy_repo(tmp_path_factory.mktemp("repo") / "model-repo")
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
