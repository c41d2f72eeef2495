"""LFM2 (Liquid's short-convolution hybrid, `Lfm2ForCausalLM`): attention layers with keys and
values, and `conv` layers whose only state is a depthwise causal convolution's last
`conv_L_cache - 1` inputs, `past.N.conv` (batch, hidden, conv_L_cache - 1), the layout
onnxruntime-genai 0.18's LFM2 builder writes and runs. Exported as the model is: its one-token
path (`causal_conv1d_update`) and its multi-token path over a past state compute the same
convolution, and the step is exported from the multi-token one (state_cache.py)."""

from __future__ import annotations

from onnx_parity.models.generating.base import DecoderFamily
from onnx_parity.models.generating.state_cache import StateFamily

FAMILY: DecoderFamily = StateFamily("lfm2", ("lfm2",))
