"""Shared fixtures: the fixture repository of real models and samples, checked for real."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from fixture_repo.harness import copy_repo, write_samples


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = copy_repo(tmp_path_factory.mktemp("repo") / "model-repo")
    write_samples(repo)
    return repo


@functools.cache
def warm_like_a_worker() -> str:
    """This process warmed once as a model worker's zygote is (pipeline/warm_up.py), so a model
    run in it exports as in a worker: without it every dynamo export parses torchlib's catalogue
    again (measured: 0.26 s of CPU each, 37 exports in the fast loop). What the warm-up's own
    export warns goes unseen, as in the zygote, where it goes to /dev/null."""
    from onnx_parity.pipeline.warm_up import preload

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preload(warm_up=True)


@pytest.fixture
def check_model(model_repo: Path, tmp_path: Path) -> Callable[..., object]:
    """Write a one-model configuration and run that model in this process, warmed as a worker."""
    warm_like_a_worker()
    from onnx_parity.pipeline.one_model import run_in_process
    from onnx_parity.settings.loading import load_settings

    def run(config: str) -> object:
        path = model_repo / "configs" / f"{tmp_path.name}.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(config, encoding="utf-8")
        settings = load_settings(model_repo, path)
        return run_in_process(settings.models[0], model_repo, tmp_path)

    return run
