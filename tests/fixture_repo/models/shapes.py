"""Tiny models for every declared shape and where numbers diverge (tests/test_shapes_*.py)."""

import torch
from torch import nn


class RecurrentLoop(nn.Module):
    """A recurrent cell stepped in a Python loop over the time axis: TorchScript unrolls it."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.RNNCell(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = torch.zeros(x.shape[0], 5)
        for step in range(x.shape[1]):
            state = self.cell(x[:, step], state)
        return state


class PositionEmbedding(nn.Module):
    """A learned position table sliced by the input's length: runs at every length up to 16."""

    def __init__(self) -> None:
        super().__init__()
        self.positions = nn.Parameter(torch.randn(16, 6))
        self.fc = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x + self.positions[: x.size(1)])


class FixedLength(nn.Module):
    """A position table added whole: PyTorch itself runs this at the committed length only."""

    def __init__(self) -> None:
        super().__init__()
        self.positions = nn.Parameter(torch.randn(8, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.positions).sum(-1)


def sequential() -> nn.Module:
    """nn.Sequential's forward takes `input`; the configuration calls it `x`."""
    return nn.Sequential(nn.Linear(12, 3), nn.ReLU())


class ReciprocalTimes(nn.Module):
    """`(1 / d) * x`: onnxruntime's basic level fuses it into `x / d`, one rounding fewer."""

    def __init__(self) -> None:
        super().__init__()
        self.one: torch.Tensor
        self.register_buffer("one", torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.one / (x.abs() + 1.0)) * x


class TinyLanguageModel(nn.Module):
    """Ids and a mask bound by name: the mask of the forward(ids, past=None, mask=None) kind."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50)

    # `past` is never fed: it is the parameter between `ids` and `mask` that binding skips.
    def forward(self, ids: torch.Tensor, past: torch.Tensor | None = None,  # noqa: ARG002
                mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.embed(ids)
        if mask is not None:
            hidden = hidden * mask.unsqueeze(-1).to(hidden.dtype)
        return self.head(hidden)
