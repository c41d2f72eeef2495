"""The two sides of greedy decoding, one step at a time, each with its own cache.

PyTorch runs the model's own forward with its own cache object (a transformers model: the
DynamicCache it returns, fed back; a flat-cache decoder: its presents, fed back as its past).
onnxruntime runs the exported decoder-with-past file, its own presents fed back as the next
step's past. Position ids are computed on both sides as transformers' generation computes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_parity.models import CacheShape, ReferenceFailure, cache_presents, one_run
from onnx_parity.verification.runtime import Session, run_session


@dataclass(frozen=True)
class StepOutput:
    logits: np.ndarray  # (batch, sequence, vocab)
    presents: dict[str, np.ndarray]  # present.N.key / .value: (batch, heads, total, width)


def position_ids(mask: np.ndarray, sequence: int) -> np.ndarray:
    """transformers' generation: the mask's cumulative sum minus one, 1 where it is 0, the
    last `sequence` columns."""
    positions = np.cumsum(mask, axis=-1) - 1
    positions[mask == 0] = 1
    return positions[:, -sequence:].astype(np.int64)


def step_failure(error: Exception, what: str, ids: np.ndarray,
                 mask: np.ndarray) -> ReferenceFailure:
    """PyTorch's own failure at a step, naming the step's new tokens and past length (its
    worker reports it as the model's runtime-error)."""
    failure = ReferenceFailure(
        f"{type(error).__name__}: {error} ({what} with {ids.shape[1]} new token(s) after "
        f"{mask.shape[1] - ids.shape[1]} past positions)", error)
    failure.batch_size = len(ids)
    return failure


@dataclass
class TorchDecoder:
    """The model's own forward and cache. `flat`: forward(ids, mask, [positions,] *past)."""

    module: Any
    shape: CacheShape
    flat: bool
    constants: dict[str, Any]
    dtype: Any  # the past's numpy dtype (a flat decoder's empty past at step 0)
    cache: Any = None
    past: list[Any] = field(default_factory=list)

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        """One step; PyTorch's own failure is a ReferenceFailure (its worker reports it)."""
        try:
            return self._step(ids, mask)
        except Exception as error:  # whatever forward raises is the model's failure
            raise step_failure(error, "a decoding step", ids, mask) from error

    def _step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        import torch

        positions = position_ids(mask, ids.shape[1])
        with torch.no_grad(), one_run(self.module):
            if self.flat:
                return self._flat(torch, ids, mask, positions)
            given = {"position_ids": torch.from_numpy(positions)} if self.shape.positions else {}
            given[self.shape.cache_argument] = self.cache
            out = self.module(input_ids=torch.from_numpy(ids),
                              attention_mask=torch.from_numpy(mask), **given,
                              **{"use_cache": True, **self.constants})
        self.cache = getattr(out, self.shape.cache_argument)
        logits = out.logits if hasattr(out, "logits") else out[0]
        presents = cache_presents(self.cache, self.shape.attention, self.shape.states)
        return _output(logits, presents, self.shape)

    def _flat(self, torch: Any, ids: np.ndarray, mask: np.ndarray,
              positions: np.ndarray) -> StepOutput:
        if not self.past:
            self.past = [torch.from_numpy(empty) for empty in
                         self.shape.empty_past(ids.shape[0], self.dtype).values()]
        given = (torch.from_numpy(positions),) if self.shape.positions else ()
        logits, *presents = self.module(torch.from_numpy(ids), torch.from_numpy(mask), *given,
                                        *self.past)
        self.past = list(presents)
        return _output(logits, presents, self.shape)


def _output(logits: Any, presents: list[Any], shape: CacheShape) -> StepOutput:
    values = [tensor.detach().float().numpy() if str(tensor.dtype) == "torch.bfloat16"
              else tensor.detach().numpy() for tensor in (logits, *presents)]
    return StepOutput(values[0], dict(zip(shape.names("present"), values[1:], strict=True)))


@dataclass
class OnnxDecoder:
    """The exported file, its own presents fed back as the next step's past."""

    session: Session
    shape: CacheShape
    dtype: Any
    past: dict[str, np.ndarray] = field(default_factory=dict)
    feed: dict[str, np.ndarray] = field(default_factory=dict)  # the last step's inputs

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        if not self.past:
            self.past = self.shape.empty_past(ids.shape[0], self.dtype)
        feed = self.feed = {"input_ids": ids, "attention_mask": mask,
                            "position_ids": position_ids(mask, ids.shape[1]), **self.past}
        # An input the exporter dropped (unused by the graph) is not fed.
        values = run_session(self.session, {name: feed[name] for name in self.session.input_names
                                            if name in feed})
        named = dict(zip(self.session.output_names, values, strict=True))
        presents = {name: named[name] for name in self.shape.names("present")}
        past = self.shape.past_names()
        self.past = {past[name]: value for name, value in presents.items()}
        return StepOutput(named["logits"], presents)
