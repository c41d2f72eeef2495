"""A deep MLP whose numbers drift in one known block, for the reduction (tests/test_reduce.py)."""

import torch
from torch import nn


class DeepDrift(nn.Module):
    """Twelve residual Linear+tanh blocks; the eighth adds a SiLU scaled by 1000, whose ONNX
    form (x * Sigmoid(x)) rounds otherwise than PyTorch's kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(12, 12) for _ in range(12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, block in enumerate(self.blocks):
            x = x + torch.tanh(block(x))
            if index == 7:
                x = torch.nn.functional.silu(x) * 1000.0
        return x
