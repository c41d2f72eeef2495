"""Factories and forwards that fail the way pull requests make them fail."""

import os
import sys

import torch
from torch import nn


def raises() -> nn.Module:
    raise ValueError("factory broke on purpose")


def not_a_module() -> str:
    return "a string"


def exits() -> nn.Module:
    sys.exit(3)


class ForwardRaises(nn.Module):
    # `x` binds the sample input by name; the model fails before reading it.
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: ARG002
        raise RuntimeError("forward broke on purpose")


class ExitsInForward(nn.Module):
    # `x` binds the sample input by name; the model exits before reading it.
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: ARG002
        os._exit(0)


class Renamed(nn.Module):
    """Same job as good.Linear, different parameter names: old weights no longer fit."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)
