"""A model whose figures follow a file its factory reads (models/drifting.json).

The result cache must notice that file (it is opened, not imported), and a larger `scale`
makes the onnxruntime-vs-PyTorch difference of the FFT grow with it: the drift a baseline sees.
"""

import json
from pathlib import Path

import torch
from torch import nn

SETTINGS = Path(__file__).with_name("drifting.json")


class Drifting(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x * self.scale).abs()


def build() -> nn.Module:
    return Drifting(float(json.loads(SETTINGS.read_text(encoding="utf-8"))["scale"]))
