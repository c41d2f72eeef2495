"""PyTorch's side of the generation check, run first and recorded.

The two sides are independent once PyTorch's tokens are known (onnxruntime is fed PyTorch's
token at every step), so PyTorch decodes every chunk of prompts first and its step outputs are
kept; the model's weights can then leave memory (models/offload.py) before onnxruntime opens
its own copy of them and replays the same steps (checked.py). What is kept is
small beside the weights: each step's logits and presents, for the committed prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.settings import ModelSpec
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import StepOutput
from onnx_parity.verification.generation.encoder_decoding import TorchEncoderDecoder
from onnx_parity.verification.generation.prefix_decoding import torch_decoder
from onnx_parity.verification.generation.vision_language.decoding import TorchPipeline


@dataclass(frozen=True)
class RecordedStep:
    """One step as PyTorch ran it: the inputs both sides get, and PyTorch's outputs."""

    step: int
    ids: np.ndarray  # the step's new tokens
    mask: np.ndarray  # (batch, past + new)
    live: np.ndarray  # rows still decoding (not stopped at the end-of-sequence token)
    expected: StepOutput  # its presents copied: a cache may reuse its tensors' memory


@dataclass(frozen=True)
class RecordedChunk:
    """A chunk of prompt rows: greedily decoded (`decoding`), or a prompt pass (step 0) at a
    smaller batch size."""

    first_row: int
    rows: slice
    steps: tuple[RecordedStep, ...]
    decoding: bool


def torch_steps(decoders: Decoders, prompt: tuple[np.ndarray, np.ndarray],
                spec: ModelSpec) -> list[RecordedChunk]:
    """Every chunk of the largest batch size decoded, then step 0 at each smaller size."""
    assert spec.generate is not None
    ids, mask = prompt
    size = max(spec.batch_sizes)
    chunks = [_decoded(decoders, (ids[start:start + size], mask[start:start + size]),
                       slice(start, start + size), spec)
              for start in range(0, len(ids), size)]
    for smaller in sorted(set(spec.batch_sizes) - {size}):
        for start in range(0, len(ids), smaller):
            rows = slice(start, start + smaller)
            side = torch_side(decoders, spec, rows)
            live = np.ones(len(ids[rows]), dtype=bool)
            expected = _copied(side.step(ids[rows], mask[rows]))
            chunks.append(RecordedChunk(start, rows, (RecordedStep(
                0, ids[rows], mask[rows], live, expected),), decoding=False))
    return chunks


def _decoded(decoders: Decoders, prompt: tuple[np.ndarray, np.ndarray], rows: slice,
             spec: ModelSpec) -> RecordedChunk:
    """Greedy decoding of one chunk: PyTorch's token is the next step's input."""
    assert spec.generate is not None
    ids, mask = prompt
    side = torch_side(decoders, spec, rows)
    live = np.ones(len(ids), dtype=bool)
    steps = []
    for step in range(spec.generate.steps):
        if step:
            mask = np.concatenate([mask, np.ones((len(ids), 1), dtype=np.int64)], axis=1)
        expected = _copied(side.step(ids, mask))
        steps.append(RecordedStep(step, ids, mask, live.copy(), expected))
        chosen = expected.logits[:, -1].argmax(-1)
        if spec.generate.stop_at_eos:  # a row stops once PyTorch picks end-of-sequence
            live &= ~np.isin(chosen, decoders.shape.eos)
        if not live.any():
            break
        ids = chosen[:, None].astype(np.int64)
    return RecordedChunk(rows.start or 0, rows, tuple(steps), decoding=True)


def torch_side(decoders: Decoders, spec: ModelSpec, rows: slice) -> Any:
    """PyTorch with an empty cache (an encoder-decoder's or a vision-language model's: on the
    prompts' `rows`), or a decoder with no cache over its whole prefix."""
    if decoders.pipeline is not None:
        return TorchPipeline(decoders.module, decoders.pipeline, rows)
    if decoders.encoder is not None:
        return TorchEncoderDecoder(decoders.module, decoders.shape, decoders.encoder.rows(rows),
                                   dict(spec.forward_kwargs))
    return torch_decoder(decoders, dict(spec.forward_kwargs))


def _copied(output: StepOutput) -> StepOutput:
    return StepOutput(output.logits, {name: np.array(value, copy=True)
                                      for name, value in output.presents.items()})
