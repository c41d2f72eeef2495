"""PyTorch that disagrees with itself, through the real CLI: a forward that adds
`torch.randn_like` noise is `nondeterministic-model` (named at its operator and line, no parity
figure claimed), while a deterministic model that fails on numbers keeps its parity-mismatch.
"""

from __future__ import annotations

import numpy as np
import pytest

from fixture_repo.harness import run_cli

pytestmark = pytest.mark.slow  # two models exported and verified through the CLI

CONFIG = """\
batch-sizes = [1, 2]

[[model]]
name = "noisy"
factory = "models.nets:Noisy"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "spectral"
factory = "models.nets:Spectral"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
atol = 1e-12
rtol = 0
"""
NETS = '''\
import torch
from torch import nn


class Noisy(nn.Module):
    """A decoder step that samples in forward, even in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y + 0.1 * torch.randn_like(y)


class Spectral(nn.Module):
    """Deterministic, but onnxruntime's DFT differs from PyTorch's FFT beyond atol 1e-12."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).abs()
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    repo = tmp_path_factory.mktemp("nondeterministic")
    (repo / "models").mkdir()
    (repo / "models" / "__init__.py").write_text("")
    (repo / "models" / "nets.py").write_text(NETS)
    (repo / "onnx-parity.toml").write_text(CONFIG)
    (repo / "samples").mkdir()
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "x.npy", rng.standard_normal((4, 8)).astype(np.float32))
    done = run_cli("check", "--jobs", "1", cwd=repo, out=repo / "out")
    assert done.code == 1, done.stdout + done.stderr  # both models fail
    return done.models()


def test_noise_drawn_in_forward_is_a_nondeterministic_model_not_a_parity_mismatch(
        report: dict[str, dict]) -> None:
    findings = report["noisy"]["findings"]
    codes = [finding["code"] for finding in findings]
    assert "parity-mismatch" not in codes
    assert codes.count("nondeterministic-model") == 1
    assert report["noisy"]["comparisons"] == []  # no parity figure claimed for the output
    finding = next(f for f in findings if f["code"] == "nondeterministic-model")
    assert finding["severity"] == "error"
    assert 'output "output"' in finding["message"]
    assert "two runs at batch" in finding["message"]
    assert "RandomNormalLike (from aten.randn_like" in finding["message"]
    assert (finding["file"], finding["line"]) == ("models/nets.py", 14)
    assert "noise as an input" in finding["fix"]


def test_a_deterministic_model_that_fails_on_numbers_keeps_its_parity_mismatch(
        report: dict[str, dict]) -> None:
    codes = [finding["code"] for finding in report["spectral"]["findings"]]
    assert "parity-mismatch" in codes
    assert "nondeterministic-model" not in codes
    assert report["spectral"]["comparisons"]  # its figures stay
