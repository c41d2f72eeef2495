"""Mamba2 (`Mamba2ForCausalLM`): every layer a Mamba2 mixer, no attention, its cache passed as
`cache_params` (transformers 5.23's DynamicCache of `LinearAttentionLayer`s): a conv state
`past.N.conv` (batch, intermediate + 2 * groups * state_size, conv_kernel - 1) and an SSM
state `past.N.recurrent` (batch, heads, head_dim, state_size) per layer, in the pattern of
onnxruntime-genai's names (genai 0.18 does not run Mamba2). Exported as the hybrid mamba
families are (mamba_hybrid.py: the chunked scan over a past state, by TorchScript)."""

from __future__ import annotations

from onnx_parity.models.generating.base import DecoderFamily
from onnx_parity.models.generating.mamba_hybrid import normalise_permute
from onnx_parity.models.generating.state_cache import TORCHSCRIPT_FIRST, StateFamily

FAMILY: DecoderFamily = StateFamily("mamba2", ("mamba2",), cache_argument="cache_params",
                                    prepare=normalise_permute, exporters=TORCHSCRIPT_FIRST)
