"""Size-derived floats, as kornia derives a blur's sigma and kernel from the image size: the
dynamo export keeps the kernel of the export width and a guard saying when that is valid."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SizedBlur(nn.Module):
    """A horizontal Gaussian blur whose sigma grows with the width (a float of the size) and
    whose kernel widens from 3 to 5 taps past a sigma of 2.6 (width 103), then a small CNN."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        sigma = 1.0 + frames.shape[3] / 64
        size = 3 if sigma < 2.6 else 5
        taps = torch.arange(size, dtype=torch.float32) - size // 2
        kernel = torch.exp(-(taps**2) / (2 * sigma**2))
        kernel = (kernel / kernel.sum()).view(1, 1, 1, size)
        blurred = F.conv2d(frames, kernel, padding=(0, size // 2))
        return self.conv(blurred).mean((2, 3))


def sized_blur() -> SizedBlur:
    return SizedBlur().eval()


class LogScale(nn.Module):
    """A branch on `math.log2` of the width: torch.export cannot keep the width symbolic
    through it, so torch.onnx captures the model itself and bakes the branch of the export's
    width (64: log2 6) with no guard recorded; from 91 on, the ONNX file is wrong."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        import math

        if math.log2(frames.shape[3]) > 6.5:
            frames = frames * 2
        return self.conv(frames).mean((2, 3))


def log_scale() -> LogScale:
    return LogScale().eval()
