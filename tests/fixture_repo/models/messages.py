"""Models behind the messages a user must be able to act on (tests/test_messages.py)."""

import torch
from torch import nn


class Spectrogram(nn.Module):
    """torch.stft with complex output: the TorchScript exporter has no translation for it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        window = torch.hann_window(8)
        return torch.stft(x, n_fft=8, window=window, return_complex=True).abs()


class DropoutZero(nn.Module):
    """A Dropout(p=0) behaves the same in training: not worth a training-mode note."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 3)
        self.drop = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


def dropout_zero() -> nn.Module:
    return DropoutZero().train()
