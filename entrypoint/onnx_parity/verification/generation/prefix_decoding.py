"""The two sides of a decoder with no cache (models/generating/whole_prefix.py): each step runs
the whole prefix again, the prompt and every token fed so far.

Both sides keep the prefix themselves and take a step's new tokens as the cached sides do
(decoding.py), so torch_steps.py and checked.py drive them alike; a step's logits cover the
whole prefix (past length 0: there is no past), and its presents are none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_parity.models import one_run, prefix_logits
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import (
    OnnxDecoder,
    StepOutput,
    TorchDecoder,
    step_failure,
)
from onnx_parity.verification.runtime import Session, run_session


@dataclass
class Prefix:
    """The tokens fed so far, the step's new ones appended."""

    ids: np.ndarray | None = None

    def extended(self, new: np.ndarray) -> np.ndarray:
        self.ids = new if self.ids is None else np.concatenate([self.ids, new], axis=1)
        return self.ids


@dataclass
class TorchPrefix:
    """The model's own forward over the whole prefix, its cache switches off."""

    module: Any
    prefix: Prefix = field(default_factory=Prefix)

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        """One step; PyTorch's own failure is a ReferenceFailure (its worker reports it)."""
        import torch

        whole = self.prefix.extended(ids)
        try:
            with torch.no_grad(), one_run(self.module):
                logits = prefix_logits(self.module, torch.from_numpy(whole),
                                       torch.from_numpy(mask))
        except Exception as error:  # whatever forward raises is the model's failure
            raise step_failure(error, "a whole-prefix step", ids, mask) from error
        value = logits.detach()  # numpy has no bfloat16: compared in float32, as decoding.py
        return StepOutput((value.float() if value.dtype == torch.bfloat16 else value).numpy(),
                          {})


@dataclass
class OnnxPrefix:
    """The exported file over the whole prefix."""

    session: Session
    prefix: Prefix = field(default_factory=Prefix)
    feed: dict[str, np.ndarray] = field(default_factory=dict)  # the last step's inputs

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        whole = self.prefix.extended(ids)
        feed = self.feed = {"input_ids": whole, "attention_mask": mask}
        # An input the exporter dropped (unused by the graph) is not fed.
        values = run_session(self.session, {name: feed[name] for name in self.session.input_names
                                            if name in feed})
        named = dict(zip(self.session.output_names, values, strict=True))
        return StepOutput(named["logits"], {})


def torch_decoder(decoders: Decoders, constants: dict[str, Any]) -> TorchDecoder | TorchPrefix:
    """A decoder's PyTorch side from its first step: its own cache, or none (whole prefix)."""
    if decoders.shape.whole_prefix:
        return TorchPrefix(decoders.module)
    return TorchDecoder(decoders.module, decoders.shape, decoders.flat, constants,
                        decoders.dtype)


def onnx_decoder(session: Session, decoders: Decoders) -> OnnxDecoder | OnnxPrefix:
    """A decoder file's side from its first step: its presents fed back, or the whole prefix."""
    if decoders.shape.whole_prefix:
        return OnnxPrefix(session)
    return OnnxDecoder(session, decoders.shape, decoders.dtype)
