"""Git LFS pointers where samples, weights and golden files should be (issue 16 §1).

A checkout without `lfs: true` leaves each LFS-tracked file as a small text pointer. The
detector is tested on pointer texts written in the exact format git-lfs writes; the loaders
through the real CLI on a fresh repository, one run for every kind of file, beside a good
model that must still pass.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from onnx import numpy_helper

from fixture_repo.harness import CliRun, run_cli
from onnx_parity.models.lfs import LFS_FIX, MAX_POINTER_BYTES, LfsPointer, file_pointer, lfs_pointer

NET = """\
import torch


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def build():
    torch.manual_seed(0)
    return Linear()
"""

CONFIG = """\
batch-sizes = [1, 2]
timeout-seconds = 120

[[model]]
name = "good"
factory = "nets:build"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "npy-pointer"
factory = "nets:build"
inputs = { x = "samples/lfs.npy" }

[[model]]
name = "pt-pointer"
factory = "nets:build"
inputs = { x = "samples/lfs.pt" }

[[model]]
name = "weights-pointer"
factory = "nets:build"
weights = "weights/net.pt"
inputs = { x = "samples/x.npy" }

[[model]]
name = "golden-pointer"
factory = "nets:build"
inputs = "zoo-golden"

[[model]]
name = "zoo-pointers"
factory = "nets:build"
inputs = "zoo-inputs"
"""


def pointer_text(content: bytes) -> bytes:
    """The pointer git-lfs writes in place of `content` (docs/spec.md of git-lfs)."""
    return (b"version https://git-lfs.github.com/spec/v1\n"
            b"oid sha256:" + hashlib.sha256(content).hexdigest().encode() + b"\n"
            b"size " + str(len(content)).encode() + b"\n")


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def proto_bytes(array: np.ndarray) -> bytes:
    return numpy_helper.from_array(array).SerializeToString()


REAL = npy_bytes(np.arange(300_000, dtype=np.float32).reshape(75_000, 4))


# ---------------------------------------------------------------------------------------------
# The detector


def test_a_pointer_gives_the_oid_and_the_size_of_the_real_file() -> None:
    pointer = lfs_pointer(pointer_text(REAL))
    assert pointer == LfsPointer(hashlib.sha256(REAL).hexdigest(), len(REAL))
    assert pointer.described() == (f"a Git LFS pointer to a 1,200,128-byte file "
                                   f"(oid {hashlib.sha256(REAL).hexdigest()[:12]}...)")


def test_a_pointer_with_an_extension_key_is_still_one() -> None:
    text = pointer_text(REAL).replace(b"oid ", b"ext-0-foo sha256:" + b"0" * 64 + b"\noid ")
    assert lfs_pointer(text) == lfs_pointer(pointer_text(REAL))


@pytest.mark.parametrize("cut", [20, 50, 120, -2, -1])
def test_a_truncated_pointer_is_not_one(cut: int) -> None:
    assert lfs_pointer(pointer_text(REAL)[:cut]) is None


def test_a_real_npy_holding_the_pointer_text_is_not_one(tmp_path: Path) -> None:
    text = pointer_text(REAL)
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes(np.frombuffer(text, dtype=np.uint8)))
    assert text in path.read_bytes()
    assert file_pointer(path) is None


def test_a_large_file_starting_like_a_pointer_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(pointer_text(REAL) + b"x" * MAX_POINTER_BYTES)
    assert file_pointer(path) is None
    assert file_pointer(tmp_path / "absent.npy") is None


# ---------------------------------------------------------------------------------------------
# Every loader, through the real CLI


def write_repo(repo: Path) -> dict[str, bytes]:
    """The repository as a checkout without Git LFS leaves it; returns each pointer's real file."""
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    real = {"samples/lfs.npy": REAL, "samples/lfs.pt": REAL[:4096], "weights/net.pt": REAL[:8192],
            "zoo-golden/test_data_set_0/output_0.pb": proto_bytes(x[:, :3]),
            "zoo-inputs/test_data_set_0/input_0.pb": proto_bytes(x),
            "zoo-inputs/test_data_set_1/input_0.pb": proto_bytes(x * 2)}
    files = {"nets.py": NET.encode(), "onnx-parity.toml": CONFIG.encode(),
             "samples/x.npy": npy_bytes(x),
             "zoo-golden/test_data_set_0/input_0.pb": proto_bytes(x),
             "zoo-inputs/test_data_set_1/output_0.pb": proto_bytes(x[:, :3]),
             **{name: pointer_text(content) for name, content in real.items()}}
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)
    return real


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[CliRun, CliRun, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("lfs")
    repo = root / "repo"
    real = write_repo(repo)
    cache = ("--cache", str(root / "cache"))
    first = run_cli("check", *cache, "--jobs", "2", cwd=repo, out=root / "first")
    second = run_cli("check", *cache, "--jobs", "2", cwd=repo, out=root / "second")
    return first, second, real


def load_error(run: CliRun, name: str) -> dict:
    model = run.models()[name]
    assert [finding["code"] for finding in model["findings"]] == ["load-error"], model
    return model["findings"][0]


def says_lfs(finding: dict, what: str, real: bytes) -> None:
    """The finding names the file, the real size and oid, and has the one LFS fix."""
    oid = hashlib.sha256(real).hexdigest()[:12]
    assert what in finding["message"]
    assert f"a Git LFS pointer to a {len(real):,}-byte file (oid {oid}...)" in finding["message"]
    assert "the checkout did not fetch Git LFS files" in finding["message"]
    assert "pickle" not in finding["message"]
    assert "Fix:" not in finding["message"]
    assert finding["fix"] == LFS_FIX


@pytest.mark.slow
def test_the_other_models_still_run_and_pass(checked: tuple[CliRun, CliRun, dict]) -> None:
    first, _, _ = checked
    assert first.code == 1, first.stderr
    assert first.models()["good"]["passed"] is True


@pytest.mark.slow
@pytest.mark.parametrize(("model", "what", "file"), [
    ("npy-pointer", "Sample file samples/lfs.npy (config key `inputs.x`) is", "samples/lfs.npy"),
    ("pt-pointer", "Sample file samples/lfs.pt (config key `inputs.x`) is", "samples/lfs.pt"),
    ("weights-pointer", 'weights "weights/net.pt" (config key `weights`) is', "weights/net.pt"),
    ("golden-pointer", "Model Zoo folder zoo-golden (config key `inputs`) holds 1 Git LFS "
     "pointer among its 2 files (0 inputs, 1 golden output); golden file "
     "zoo-golden/test_data_set_0/output_0.pb is", "zoo-golden/test_data_set_0/output_0.pb"),
    ("zoo-pointers", "Model Zoo folder zoo-inputs (config key `inputs`) holds 2 Git LFS "
     "pointers among its 3 files (2 inputs, 0 golden outputs); sample file "
     "zoo-inputs/test_data_set_0/input_0.pb is", "zoo-inputs/test_data_set_0/input_0.pb"),
])
def test_each_pointer_is_a_load_error_with_its_size_and_the_lfs_fix(
        checked: tuple[CliRun, CliRun, dict[str, bytes]], model: str, what: str,
        file: str) -> None:
    first, _, real = checked
    says_lfs(load_error(first, model), what, real[file])


@pytest.mark.slow
def test_a_pointers_load_error_is_never_taken_from_the_cache(
        checked: tuple[CliRun, CliRun, dict]) -> None:
    first, second, _ = checked
    models = second.models()
    assert models["good"].get("cached_from"), models["good"]
    for name in ("npy-pointer", "pt-pointer", "weights-pointer", "golden-pointer",
                 "zoo-pointers"):
        assert not models[name].get("cached_from"), name
        assert load_error(second, name) == load_error(first, name)
