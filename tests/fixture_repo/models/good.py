"""Models that must pass: the control group every bad run includes."""

import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class TwoInputs(nn.Module):
    """Token ids and a mask: the model of the "forward needs an input" cases."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 4)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (self.embed(ids) * mask.unsqueeze(-1).float()).sum(1)


class Scaled(nn.Module):
    """Two inputs of different shapes: bound to the wrong parameters, forward cannot run."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * scale
