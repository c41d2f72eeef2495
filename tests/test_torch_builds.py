"""torchvision next to the image's CPU torch: the requirements input holds it to the CPU build
that pairs with torch, and a CUDA build that got in anyway is a load-error naming the fix.

The CUDA build is the real one: torchvision 0.28.0 as the public index serves it (7.7 MB,
downloaded once per session with pip, as a user's `pip install torchvision` would fetch it),
installed into a folder of its own, never into the test environment.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_repo.harness import run_cli
from onnx_parity.models.torch_builds import companion_pins
from onnx_parity.publishing.github.preflight import constraints_file, torch_index_options
from test_action_flow import PASSING, FakeCheck, pr_env, run_step

CUDA_TORCHVISION = "torchvision==0.28.0"
VISION_MODEL = '''\
import torch
import torchvision  # line 2: the CUDA build fails here


def build():
    return torchvision.models.squeezenet1_1(num_classes=4).eval()
'''
CONFIG = """\
[[model]]
name = "vision"
factory = "models.vision:build"
inputs = { x = "samples/x.npy" }
"""


@pytest.fixture(scope="session")
def cuda_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cuda-torchvision")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                           "-d", str(folder), CUDA_TORCHVISION], capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        pytest.skip(f"the package registry did not serve {CUDA_TORCHVISION}: {done.stderr[-300:]}")
    return folder


@pytest.fixture(scope="session")
def cuda_torchvision(cuda_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("cuda-torchvision-installed")
    [wheel] = cuda_wheel.glob("torchvision-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    return target


def test_the_constraints_hold_torchvision_to_the_cpu_build_of_this_torch() -> None:
    torch = importlib.metadata.version("torch")
    assert torch == "2.13.0+cpu"
    assert companion_pins(torch) == ["torchvision==0.28.0+cpu"]
    assert companion_pins("2.13.0") == ["torchvision==0.28.0"]  # a torch without local tag
    with constraints_file({}) as path:
        lines = path.read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0+cpu" in lines
    assert "torchvision==0.28.0+cpu" in lines
    assert torch_index_options({"ONNX_PARITY_TORCH_INDEX_URL": "https://example.org/whl/cpu"}) \
        == ["--extra-index-url", "https://example.org/whl/cpu"]
    assert torch_index_options({}) == []


def test_the_image_lock_gets_the_same_pins(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.4.6\ntorch==2.13.0+cpu", encoding="utf-8")
    with constraints_file({"ONNX_PARITY_CONSTRAINTS": str(lock)}) as path:
        assert path.read_text(encoding="utf-8") == (
            "numpy==2.4.6\ntorch==2.13.0+cpu\ntorchvision==0.28.0+cpu\n")


def test_requirements_never_install_the_cuda_torchvision(tmp_path, cuda_wheel: Path) -> None:
    """Only the CUDA build on offer (as on the public index): the install is refused, exit 2,
    rather than a torchvision that cannot import."""
    from fake_github import FakeGitHub, Token
    from test_action_flow import TOKEN

    with FakeGitHub({TOKEN: Token.installation()}) as github:
        env = pr_env(tmp_path, github, requirements="requirements.txt")
        env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(cuda_wheel)}
        (Path(env["GITHUB_WORKSPACE"]) / "requirements.txt").write_text("torchvision\n")
        check = FakeCheck(PASSING)
        step = run_step(env, check)
    assert step.code == 2
    assert check.calls == []
    [(props, message)] = step.commands("error")
    assert props["title"] == "onnx-parity: requirements"
    assert "torchvision==0.28.0+cpu (the builds that pair with that torch)" in message
    pip = message.split("pip's last lines")[1]
    assert "==0.28.0+cpu" in pip
    assert "ResolutionImpossible" in pip
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("torchvision")


def test_torchaudio_without_a_release_for_this_torch_says_so(tmp_path) -> None:
    from fake_github import FakeGitHub, Token
    from test_action_flow import TOKEN

    with FakeGitHub({TOKEN: Token.installation()}) as github:
        env = pr_env(tmp_path, github, requirements="requirements.txt")
        env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}  # nothing on offer
        (Path(env["GITHUB_WORKSPACE"]) / "requirements.txt").write_text("torchaudio\n")
        step = run_step(env, FakeCheck(PASSING))
    assert step.code == 2
    [(_, message)] = step.commands("error")
    assert ("torchaudio has no release built for torch 2.13.0 (its last release, 2.11, requires "
            "torch 2.11): remove it.") in message


@pytest.mark.slow
def test_a_cuda_torchvision_that_got_in_is_a_load_error_naming_the_package_and_the_fix(
        tmp_path: Path, cuda_torchvision: Path) -> None:
    import numpy as np

    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "vision.py").write_text(VISION_MODEL, encoding="utf-8")
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    np.save(repo / "samples" / "x.npy", np.zeros((1, 3, 32, 32), dtype=np.float32))
    done = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out",
                   env={"PYTHONPATH": str(cuda_torchvision)})
    assert done.code == 1, done.stderr
    [finding] = done.models()["vision"]["findings"]
    assert finding["code"] == "load-error"
    assert (finding["file"], finding["line"]) == ("models/vision.py", 2)
    message = finding["message"]
    assert message.startswith('importing "models.vision" failed at models/vision.py:2: '
                              "torchvision 0.28.0 cannot be imported next to torch 2.13.0+cpu "
                              "(RuntimeError: operator torchvision::nms does not exist): it is "
                              "a CUDA build.")
    assert "libc10_cuda.so: cannot open shared object file" in message  # the loader's words
    assert "Fix:" not in message  # the fix is the finding's own, once
    assert "Install the build that pairs with this torch, torchvision==0.28.0+cpu" in finding["fix"]
    assert "Traceback" not in message
