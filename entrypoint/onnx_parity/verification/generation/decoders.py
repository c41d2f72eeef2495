"""What a generating model is decoded with (`Decoders`): its module, its exported decoder file and
the other files of an encoder-decoder or a vision-language pipeline.

A module of its own because the check (checked.py), PyTorch's recorded steps (torch_steps.py),
the threshold steps and genai's loop all take it, and the check imports PyTorch's steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.models import CacheShape, OffloadedWeights
from onnx_parity.verification.generation.encoder_decoding import EncoderSide
from onnx_parity.verification.generation.vision_language.decoding import PipelineSide


@dataclass(frozen=True)
class Decoders:
    """What a chunk of prompts is decoded with: PyTorch's module and onnxruntime's session."""

    module: Any  # the user's module (a flat-cache decoder: not the export's wrapper)
    model: Path  # the exported decoder-with-past file
    shape: CacheShape
    flat: bool
    dtype: Any  # the cache's numpy dtype
    threads: int = 0
    encoder: EncoderSide | None = None  # an encoder-decoder's encoder file and inputs
    # The module's weights, written out while onnxruntime decodes (None: they stay).
    weights: OffloadedWeights | None = None
    pipeline: PipelineSide | None = None  # a vision-language model's other two files
