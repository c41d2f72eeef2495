"""Models called as they are deployed (issue 21): a decoding step whose mask is one longer than
its cache, a time-major GRU, and segment-anything's own ONNX decoder with unbatched inputs."""

from __future__ import annotations

import torch
from torch import nn


class Step(nn.Module):
    """One decoding step: a query of one token attends over the past keys and its own key; the
    mask covers past + 1 positions and the present keys are past + 1 long."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor,
                past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = torch.cat([past, self.k(x)], dim=1)  # (B, P + 1, 8)
        scores = self.q(x) @ key.transpose(1, 2)  # (B, 1, P + 1)
        scores = scores.masked_fill(attention_mask[:, None, :] == 0, -1e4)
        return scores.softmax(-1) @ key, key


def step() -> Step:
    return Step().eval()


class TimeMajor(nn.Module):
    """A GRU in PyTorch's default layout: (time, batch, features) in, (time, batch, hidden) out."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gru = nn.GRU(6, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return out


def time_major() -> TimeMajor:
    return TimeMajor().eval()


def sam_decoder() -> nn.Module:
    """segment-anything's SamOnnxModel around a tiny SAM with seeded weights."""
    from segment_anything.modeling import (
        ImageEncoderViT,
        MaskDecoder,
        PromptEncoder,
        Sam,
        TwoWayTransformer,
    )
    from segment_anything.utils.onnx import SamOnnxModel

    torch.manual_seed(0)
    encoder = ImageEncoderViT(img_size=64, patch_size=4, embed_dim=32, depth=1, num_heads=2,
                              out_chans=32, window_size=4, global_attn_indexes=())
    prompts = PromptEncoder(embed_dim=32, image_embedding_size=(16, 16),
                            input_image_size=(64, 64), mask_in_chans=4)
    decoder = MaskDecoder(transformer_dim=32, transformer=TwoWayTransformer(
        depth=1, embedding_dim=32, mlp_dim=64, num_heads=2), num_multimask_outputs=3,
        iou_head_depth=2, iou_head_hidden_dim=32)
    return SamOnnxModel(Sam(encoder, prompts, decoder), return_single_mask=True).eval()
