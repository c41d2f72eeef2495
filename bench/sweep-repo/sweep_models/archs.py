"""Eight real architectures from small configs (seeded random weights, nothing downloaded), each
with a declared time, sequence or image axis: the lengths sweep's benchmark (bench/sweep.py)."""

import torch
from torch import nn


class Bert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        self.bert = BertModel(BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class Gpt2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        self.gpt2 = GPT2LMHeadModel(GPT2Config(
            vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2, use_cache=False))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.gpt2(input_ids=input_ids).logits


class Vit(nn.Module):
    """Position embeddings interpolated to the image size, as for images of several sizes."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import ViTConfig, ViTModel

        self.vit = ViTModel(ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=pixel_values, interpolate_pos_encoding=True).last_hidden_state


class WhisperEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import WhisperConfig
        from transformers.models.whisper.modeling_whisper import WhisperEncoder as Encoder

        self.encoder = Encoder(WhisperConfig(
            num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
            encoder_ffn_dim=64, max_source_positions=32))

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_features).last_hidden_state


class Wav2Vec2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import Wav2Vec2Config, Wav2Vec2Model

        self.model = Wav2Vec2Model(Wav2Vec2Config(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_kernel=(10, 3), conv_stride=(5, 2),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2))

    def forward(self, input_values: torch.Tensor) -> torch.Tensor:
        return self.model(input_values).last_hidden_state


class Swin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import SwinConfig, SwinModel

        self.swin = SwinModel(SwinConfig(
            image_size=64, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1],
            num_heads=[2, 2], window_size=4))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.swin(pixel_values=pixel_values).last_hidden_state


def conv1d() -> nn.Module:
    return nn.Sequential(nn.Conv1d(8, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 16, 3, stride=2),
                         nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 4))


def conv2d() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, 4))


def bert() -> nn.Module:
    return Bert().eval()


def gpt2() -> nn.Module:
    return Gpt2().eval()


def vit() -> nn.Module:
    return Vit().eval()


def whisper() -> nn.Module:
    return WhisperEncoder().eval()


def wav2vec2() -> nn.Module:
    return Wav2Vec2().eval()


def swin() -> nn.Module:
    return Swin().eval()
