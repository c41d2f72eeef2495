"""A magnitude spectrum: aten::fft_rfft, which only the dynamo exporter translates."""

import torch
from torch import nn


class Spectrum(nn.Module):
    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(signal).abs()
