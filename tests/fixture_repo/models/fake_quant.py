"""Dynamic fake quantisation whose numbers only onnxruntime's graph optimizer changes, for the
reduction against the graph with optimizations disabled (tests/test_optimizer_reduce.py)."""

import torch
from torch import nn


class FakeQuant(nn.Module):
    """Each row rounded to int8 steps of its own scale (as quantisation-aware training does),
    then a Linear. `x * (1 / scale)` rounds twice; from "basic" on, onnxruntime's DivMulFusion
    rewrites it as `x / scale`, which rounds once, so an input on a half step can round to the
    other side: a whole step of difference, which PyTorch and the unoptimized graph never show."""

    # A buffer holding 1: `one / scale` exports as Div(1, scale), what DivMulFusion matches
    # (torch.reciprocal exports as Reciprocal, ones_like adds an Expand: neither fuses).
    one: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("one", torch.tensor(1.0))
        self.head = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax(-1, keepdim=True) / 127.0
        inverse = self.one / scale
        steps = torch.round(x * inverse)
        return self.head(steps * scale)
