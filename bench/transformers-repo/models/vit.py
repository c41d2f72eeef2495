"""A two-layer ViT on 32x32 images from a config; its last hidden state is the output."""

import torch
from torch import nn
from transformers import ViTConfig, ViTModel


class Vit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vit = ViTModel(ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=pixel_values).last_hidden_state


def build() -> nn.Module:
    return Vit().eval()
