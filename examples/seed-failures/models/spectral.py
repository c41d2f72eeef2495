"""A magnitude spectrum: aten::fft_rfft, which only the dynamo exporter translates."""

import torch
from torch import nn


class Spectrum(nn.Module):
    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(signal).abs()


class SpectralHead(nn.Module):
    """A filter bank, the magnitude spectrum of each band, a linear read-out."""

    def __init__(self) -> None:
        super().__init__()
        self.filters = nn.Conv1d(1, 4, kernel_size=5, padding=2)
        self.readout = nn.Linear(4 * 33, 8)

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        bands = self.filters(signal.unsqueeze(1))
        spectrum = torch.fft.rfft(bands).abs()
        return self.readout(spectrum.flatten(1))
