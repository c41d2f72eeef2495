"""Models that are right at the export's length and wrong at others (tests/test_lengths.py)."""

import torch
import torch.nn.functional as F
from torch import nn


class PaddedAttention(nn.Module):
    """Self-attention over time padded to a multiple of 8, the padding attended to: right at 16
    and 8, where nothing is padded; an export that keeps the branch of 16 is wrong elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(6, 18)
        self.out = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = x.shape[1]
        if steps % 8 != 0:
            x = F.pad(x, (0, 0, 0, 8 - steps % 8))
        query, key, value = self.qkv(x).chunk(3, -1)
        attention = torch.softmax(query @ key.transpose(1, 2) / 6 ** 0.5, -1) @ value
        return self.out(attention[:, :steps])


class Smoothing(nn.Module):
    """A same-padded convolution over time: right at every length."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(6, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2))


def tiny_swin() -> nn.Module:
    """A transformers Swin from a small config (seeded random weights): 4x4 patches, windows of
    4, two stages; its window partition pads the feature map to a multiple of the window."""
    from transformers import SwinConfig, SwinModel

    config = SwinConfig(image_size=64, patch_size=4, num_channels=3, embed_dim=16,
                        depths=[1, 1], num_heads=[2, 2], window_size=4)
    return SwinModel(config)


def tiny_segformer() -> nn.Module:
    """A transformers SegFormer from a small config (seeded random weights). Its first forward
    installs transformers 5's output-capturing hooks and sets a flag on the model: a run that
    dropped the flag but kept the hooks made the next forward capture every state twice."""
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    torch.manual_seed(0)
    config = SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1],
                             sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                             decoder_hidden_size=32, patch_sizes=[7, 3], strides=[4, 2],
                             mlp_ratios=[2, 2])
    config.num_labels = 4
    return SegformerForSemanticSegmentation(config).eval()
