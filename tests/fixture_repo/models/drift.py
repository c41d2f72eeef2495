"""Models whose numbers drift in one known place, to localise (tests/test_divergence.py)."""

import torch
from torch import nn


class SpectralHead(nn.Module):
    """conv1d -> rfft magnitude -> linear: the FFT's decomposition drifts most."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(8, 8, kernel_size=3, padding=1)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.conv(x)
        spectrum = torch.fft.rfft(features).abs()
        return self.head(spectrum * 10.0)


class Scale(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


class Shift(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1.0


class Smooth(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x) * 1000.0


class ThirdBlockDrift(nn.Module):
    """Exact blocks (a scale, a shift), then a SiLU whose ONNX form rounds otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Scale(), Shift(), Smooth(), Scale())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class FunctionalDrift(nn.Module):
    """The same drift in plain functional code: no module scope for TorchScript to name."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x * 2.0 + 1.0) * 1000.0
