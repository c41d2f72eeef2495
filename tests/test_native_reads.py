"""Files read by native code are part of a cached result, through the real CLI with `--cache`.

safetensors (Rust) and the tokenizers library (Rust) open their files without Python's `open`,
so no audit event sees them; the workers' inotify watch does. Each test changes one file and
checks that the model that read it runs again and the others come from the cache. The runs use
`--jobs 1`: while two workers run at once, each also records what the other opened (too much,
never too little), which the last test shows.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, run_cli

pytestmark = pytest.mark.slow  # each test runs the repository's models through the CLI

MODELS = ("weighted", "loader", "tokenised")
CONFIG = """\
batch-sizes = [1, 2]

[[model]]
name = "weighted"
factory = "models.nets:linear"
weights = "weights/linear.safetensors"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "loader"
factory = "models.nets:loads_its_own"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "tokenised"
factory = "models.nets:embedding"
inputs = { ids = "samples/ids.npy" }
dynamic-axes = { ids = { 0 = "batch" } }
"""
NETS = '''\
"""Three factories: declared safetensors weights, safetensors read by the factory itself, and
a vocabulary size read from tokenizer.json by the tokenizers library."""

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import nn


def linear() -> nn.Module:
    return nn.Linear(4, 3)


def loads_its_own() -> nn.Module:
    layer = nn.Linear(4, 3)
    layer.load_state_dict(load_file("weights/inner.safetensors"))
    return layer


class Embedded(nn.Module):
    def __init__(self, vocabulary: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids).mean(dim=1)


def embedding() -> nn.Module:
    return Embedded(Tokenizer.from_file("tokenizer.json").get_vocab_size())
'''


def write_repo(repo: Path) -> None:
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("")
    (repo / "models" / "nets.py").write_text(NETS)
    (repo / "onnx-parity.toml").write_text(CONFIG)
    (repo / "samples").mkdir()
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "x.npy", rng.standard_normal((4, 4)).astype(np.float32))
    np.save(repo / "samples" / "ids.npy", rng.integers(0, 5, (4, 6)).astype(np.int64))
    (repo / "weights").mkdir()
    write_weights(repo / "weights" / "linear.safetensors", 0.5)
    write_weights(repo / "weights" / "inner.safetensors", 0.25)
    write_tokenizer(repo / "tokenizer.json", ["the", "cat", "sat", "on", "mat"])


def write_weights(path: Path, scale: float) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"weight": torch.full((3, 4), scale), "bias": torch.zeros(3)}, str(path))


def write_tokenizer(path: Path, words: list[str]) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    vocabulary = {"[UNK]": 0, **{word: index + 1 for index, word in enumerate(words)}}
    Tokenizer(WordLevel(vocab=vocabulary, unk_token="[UNK]")).save(str(path))


@dataclass(frozen=True)
class Warm:
    repo: Path
    cache: Path


def check(repo: Path, cache: Path, out: Path, jobs: int = 1) -> CliRun:
    done = run_cli("check", "--cache", str(cache), "--jobs", str(jobs), cwd=repo, out=out)
    assert done.code == 0, done.stdout + done.stderr
    return done


def ran(done: CliRun) -> set[str]:
    return {name for name, model in done.models().items() if model["cached"] is False}


def reused(done: CliRun) -> set[str]:
    return {name for name, model in done.models().items() if model["cached"] is True}


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    root = tmp_path_factory.mktemp("native")
    write_repo(root / "repo")
    assert ran(check(root / "repo", root / "cache", root / "out")) == set(MODELS)
    return Warm(root / "repo", root / "cache")


def copied(warm: Warm, tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(warm.repo, tmp_path / "repo")
    shutil.copytree(warm.cache, tmp_path / "cache")
    return tmp_path / "repo", tmp_path / "cache"


def test_the_native_reads_are_recorded_and_an_unchanged_repository_is_served_from_the_cache(
        warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    done = check(repo, cache, tmp_path / "out")
    assert reused(done) == set(MODELS)
    entries = {path.parent.parent.parent.name: path.read_text(encoding="utf-8")
               for path in cache.glob("v1/*/*/*/entry.json")}
    assert '"weights/inner.safetensors"' in entries["loader"]
    assert '"tokenizer.json"' in entries["tokenised"]
    assert "tokenizer.json" not in entries["loader"]  # only what each model read


@pytest.mark.parametrize(("changed", "model"), [
    ("weights/linear.safetensors", "weighted"),  # weights = "...safetensors": the key's file
    ("weights/inner.safetensors", "loader"),  # safetensors.torch.load_file in the factory
])
def test_changed_safetensors_weights_run_the_model_that_loads_them_again(
        warm: Warm, tmp_path: Path, changed: str, model: str) -> None:
    repo, cache = copied(warm, tmp_path)
    write_weights(repo / changed, 2.0)
    done = check(repo, cache, tmp_path / "out")
    assert ran(done) == {model}
    assert reused(done) == set(MODELS) - {model}


def test_a_changed_tokenizer_json_runs_the_model_whose_factory_read_it_again(
        warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    write_tokenizer(repo / "tokenizer.json", ["the", "dog", "sat", "on", "a", "log"])
    done = check(repo, cache, tmp_path / "out")
    assert ran(done) == {"tokenised"}
    assert reused(done) == {"weighted", "loader"}


def test_with_two_workers_at_once_a_changed_file_never_leaves_its_model_cached(
        tmp_path: Path) -> None:
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    write_repo(repo)
    check(repo, cache, tmp_path / "first", jobs=2)
    write_tokenizer(repo / "tokenizer.json", ["one", "two", "three", "four", "five", "six"])
    write_weights(repo / "weights" / "inner.safetensors", 3.0)
    done = check(repo, cache, tmp_path / "second", jobs=2)
    assert {"tokenised", "loader"} <= ran(done)
