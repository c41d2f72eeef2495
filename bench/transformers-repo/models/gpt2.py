"""A two-layer GPT-2 language model from a config; its logits are the output."""

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel


class Gpt2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gpt2 = GPT2LMHeadModel(GPT2Config(
            vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2, use_cache=False))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.gpt2(input_ids=input_ids).logits


def build() -> nn.Module:
    return Gpt2().eval()
