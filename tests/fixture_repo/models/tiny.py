"""Tiny real models, one per way an export goes wrong; used by tests/test_engine_*.py.

`Linear` and `TwoInputs` are the control group's (models/good.py), named here too.
"""

import torch
from torch import nn

from .good import Linear, TwoInputs

__all__ = ["Linear", "TwoInputs"]  # the control group's models, also configured as models.tiny


class TrainingDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


def training_dropout() -> nn.Module:
    return TrainingDropout().train()


class Branchy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.mean() > 0:
            return x * 2
        return x - 100


class SqrtIfPositive(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.min() > 0:
            return torch.sqrt(x)
        return x


class ScaleByMax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / float(x.abs().max())


class Flatten1(nn.Module):
    """Hard-codes the batch: x.view(1, -1)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.view(1, -1))


class Spectrum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).abs()


class ComplexSpectrum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x)


class OnesOfLength(nn.Module):
    """`len(x)` is a constant to the TorchScript tracer: the output keeps the export batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_ones(len(x), 2) * x.sum()


class IntRunningSum(nn.Module):
    """PyTorch's cumsum of int32 gives int64; TorchScript's ONNX CumSum keeps int32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.int().cumsum(-1)


class Eigenvalues(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigvals(x.reshape(-1, 3, 4)[:, :, :3]).real


class Box:
    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class Boxed(nn.Module):
    def forward(self, x: torch.Tensor) -> Box:
        return Box(x * 2)


class Nested(nn.Module):
    def forward(self, x: torch.Tensor) -> dict:
        return {"double": x * 2, "rest": (x + 1, None, [x - 1])}


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class TinyEncoder(nn.Module):
    """Attention and LayerNorm with a dynamic batch and sequence: the size-1 trap's territory."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(ids)).mean(1))


class HookShy(nn.Module):
    """A layer norm (a leaf module) that refuses to run under forward hooks, as some fused
    library modules do: localising by module outputs cannot record its value."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.norm = nn.LayerNorm(12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm._forward_hooks:
            raise RuntimeError("HookShy runs without forward hooks")
        return torch.exp(4 * self.norm(x))
