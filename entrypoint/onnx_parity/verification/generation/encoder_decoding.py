"""The two sides of an encoder-decoder generator's greedy decoding
(models/generating/encoder_decoder.py).

PyTorch runs the model's encoder once, then its own forward with the encoder's output and its
own EncoderDecoderCache, fed back. onnxruntime runs `<name>.encoder.onnx` once and feeds its
`last_hidden_state` to the decoder file at every step, with the decoder's own presents fed back
as the next step's past. The decoder's tokens start from the model's decoder start token, one
column for every row: its mask (the check's) is all ones and only counts the decoder's length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models import CacheShape, one_run
from onnx_parity.verification.generation.decoding import StepOutput, step_failure
from onnx_parity.verification.runtime import Session, run_session


@dataclass(frozen=True)
class EncoderSide:
    """The encoder file and the committed encoder inputs (every row)."""

    model: Path
    inputs: dict[str, np.ndarray]

    def rows(self, rows: slice) -> dict[str, np.ndarray]:
        return {name: value[rows] for name, value in self.inputs.items()}


def start_tokens(shape: CacheShape, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The decoder's first step: its start token on every row, and the decoder's mask."""
    return (np.full((rows, 1), shape.start, dtype=np.int64), np.ones((rows, 1), dtype=np.int64))


@dataclass
class TorchEncoderDecoder:
    """The model's encoder once, then its forward with its own cache."""

    module: Any
    shape: CacheShape
    encoder: dict[str, np.ndarray]  # this chunk's encoder inputs
    constants: dict[str, Any]
    cache: Any = None
    hidden: Any = None

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        try:
            return self._step(ids)
        except Exception as error:  # whatever forward raises is the model's failure
            raise step_failure(error, "an encoder-decoder step", ids, mask) from error

    def _step(self, ids: np.ndarray) -> StepOutput:
        import torch

        given = {name: torch.from_numpy(value) for name, value in self.encoder.items()}
        with torch.no_grad(), one_run(self.module):
            if self.hidden is None:
                self.hidden = self.module.get_encoder()(**given).last_hidden_state
            out = self.module(decoder_input_ids=torch.from_numpy(ids),
                              encoder_outputs=(self.hidden,),
                              attention_mask=given.get("attention_mask"),
                              past_key_values=self.cache, use_cache=True, **self.constants)
        self.cache = out.past_key_values
        tensors = [out.logits, *[tensor for layer in self.cache.self_attention_cache.layers
                                 for tensor in (layer.keys, layer.values)]]
        values = [tensor.detach().float().numpy() for tensor in tensors]
        return StepOutput(values[0], dict(zip(self.shape.names("present"), values[1:],
                                              strict=True)))


@dataclass
class OnnxEncoderDecoder:
    """The encoder file once, then the decoder file with its own presents fed back."""

    session: Session
    encoder_session: Session
    shape: CacheShape
    encoder: dict[str, np.ndarray]
    dtype: Any
    past: dict[str, np.ndarray] = field(default_factory=dict)
    feed: dict[str, np.ndarray] = field(default_factory=dict)  # the last step's inputs

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:  # noqa: ARG002
        """One step (`mask`, the decoder's, counts positions the past holds already)."""
        if not self.past:
            (hidden,) = run_session(self.encoder_session, {
                name: self.encoder[name] for name in self.encoder_session.input_names
                if name in self.encoder})[:1]
            self.past = {"encoder_hidden_states": hidden,
                         **self.shape.empty_past(len(ids), self.dtype)}
            if "attention_mask" in self.encoder:
                self.past["encoder_attention_mask"] = self.encoder["attention_mask"]
        feed = self.feed = {"input_ids": ids, **self.past}
        values = run_session(self.session, {name: feed[name] for name in self.session.input_names
                                            if name in feed})
        named = dict(zip(self.session.output_names, values, strict=True))
        presents = {name: named[name] for name in self.shape.names("present")}
        self.past.update({name.replace("present", "past_key_values", 1): value
                          for name, value in presents.items()})
        return StepOutput(named["logits"], presents)

