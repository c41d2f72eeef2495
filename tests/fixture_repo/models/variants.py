"""Models for deployment variants (int8, fp16): what quantization keeps, loses and breaks."""

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Convolutions, batch norm and a linear head: int8 and fp16 keep its scores."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(image).flatten(1))


class OutlierChannel(nn.Module):
    """One input channel of the second convolution has weights 1000x the others: one int8
    scale for the whole weight tensor leaves the other channels almost no levels."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.mix = nn.Conv2d(8, 8, 3, padding=1)
        with torch.no_grad():
            self.mix.weight[:, 0] *= 1000.0
            # Channel 0's activations stay small, so the output is not dominated by it.
            self.stem.weight[0] /= 1000.0
            bias = self.stem.bias
            assert bias is not None
            bias[0] /= 1000.0
        self.head = nn.Linear(8, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(image))
        x = torch.relu(self.mix(x))
        return self.head(x.mean((2, 3)))


class Amplified(nn.Module):
    """An activation beyond float16's range (|x| > 65504), scaled back before the output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.relu(self.fc(x)) * 1e6
        return torch.sqrt(big + 1.0) / 1e3


class HalfLinear(nn.Module):
    """Weights stored in float16: int8-dynamic has no kernel for a float16 activation."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4).half()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.half()).float()
