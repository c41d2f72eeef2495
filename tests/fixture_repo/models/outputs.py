"""Models returning structured outputs: nested tuples, dicts, lists, None."""

import torch
from torch import nn


class NestedTuple(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        return x + 1, (x * 2, (x - 1,))


class DictOut(nn.Module):
    def forward(self, x: torch.Tensor) -> dict:
        return {"double": x * 2, "half": x / 2}


class ListOut(nn.Module):
    def forward(self, x: torch.Tensor) -> list:
        return [x * 2, x.sum(1)]


class WithNone(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        return x * 2, None, x + 1


class Mixed(nn.Module):
    def forward(self, x: torch.Tensor) -> dict:
        return {"double": x * 2, "rest": (x + 1, None, [x - 1])}
