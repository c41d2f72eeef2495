"""The two sides of a vision-language model's greedy decoding (models/vision_language/).

PyTorch runs the user's model's own forward: the prompt pass with the image inputs (its own
vision tower and merge), then one token at a time with its own cache. onnxruntime runs the
pipeline as a runtime does: the vision file once per image of the prompts, the embedding file
with those features, the decoder file; then for each token the embedding file with no image
features (a generated token is embedded as text, even the image token) and the decoder.
Both sides get the positions transformers' generation computes (the family's: Qwen2-VL's rope
index at the prompt, each position plus one after it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models import Family, PipelineContract, one_run
from onnx_parity.verification.generation.decoding import StepOutput, step_failure
from onnx_parity.verification.runtime import Session, open_session, run_session


@dataclass(frozen=True)
class PipelineSide:
    """The pipeline's family and contract, its vision and embedding files, and the prompts'
    samples completed with what the tool derived (every row)."""

    family: Family
    contract: PipelineContract
    vision: Path
    embedding: Path
    prompts: dict[str, np.ndarray]


@dataclass(frozen=True)
class PipelineSessions:
    vision: Session
    embedding: Session


def open_pipeline(side: PipelineSide, optimization: str, threads: int) -> PipelineSessions:
    return PipelineSessions(open_session(side.vision, optimization, threads),
                            open_session(side.embedding, optimization, threads))


@dataclass
class TorchPipeline:
    """The user's model's own forward: the prompt with its images, then its cache."""

    module: Any
    side: PipelineSide
    rows: slice
    cache: Any = None
    positions: np.ndarray | None = None

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        try:
            return self._step(ids, mask)
        except Exception as error:  # whatever forward raises is the model's failure
            raise step_failure(error, "a vision-language step", ids, mask) from error

    def _step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        import torch

        family, model = self.side.family, self.module
        extra: dict[str, Any] = {}
        if self.positions is None:  # the prompt pass, with the rows' images
            chunk = family.rows(model, self.side.prompts, self.rows)
            self.positions = family.prompt_positions(model, chunk)
            extra = {name: torch.from_numpy(np.asarray(value)) for name, value in chunk.items()
                     if name not in ("input_ids", "attention_mask")}
        else:
            self.positions = family.step_positions(self.positions)
        with torch.no_grad(), one_run(model):
            out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                        position_ids=torch.from_numpy(self.positions),
                        past_key_values=self.cache, use_cache=True, **extra)
        self.cache = out.past_key_values
        tensors = [out.logits, *[tensor for layer in self.cache.layers
                                 for tensor in (layer.keys, layer.values)]]
        values = [tensor.detach().float().numpy() for tensor in tensors]
        names = self.side.contract.cache.names("present")
        return StepOutput(values[0], dict(zip(names, values[1:], strict=True)))


@dataclass
class OnnxPipeline:
    """The three files as a runtime runs them, the decoder's presents fed back."""

    session: Session  # the decoder's
    sessions: PipelineSessions
    side: PipelineSide
    module: Any  # the user's model: positions are transformers' (computed once per step)
    rows: slice
    dtype: Any
    positions: np.ndarray | None = None
    past: dict[str, np.ndarray] = field(default_factory=dict)
    feed: dict[str, np.ndarray] = field(default_factory=dict)  # the decoder's last feed

    def step(self, ids: np.ndarray, mask: np.ndarray) -> StepOutput:
        contract, family = self.side.contract, self.side.family
        features = np.zeros((0, contract.hidden_size), dtype=self.dtype)
        # decoder_extra: the prompts' values at the prompt pass, zeros after it
        extra = {name: np.zeros(ids.shape, dtype=np.int64) for name in contract.decoder_extra}
        if not self.past:
            chunk = family.rows(self.module, self.side.prompts, self.rows)
            extra = {name: np.asarray(chunk[name], dtype=np.int64)
                     for name in contract.decoder_extra}
            features = self._features(family.images(chunk), features)
            self.positions = family.prompt_positions(self.module, chunk)
            self.past = contract.cache.empty_past(len(ids), self.dtype)
        else:
            assert self.positions is not None
            self.positions = family.step_positions(self.positions)
        (embeds,) = run_session(self.sessions.embedding,
                                {"input_ids": ids, "image_features": features})[:1]
        assert self.positions is not None
        feed = self.feed = {"inputs_embeds": embeds, "attention_mask": mask,
                            "position_ids": self.positions, **extra, **self.past}
        values = run_session(self.session, {name: feed[name] for name in self.session.input_names
                                            if name in feed})
        named = dict(zip(self.session.output_names, values, strict=True))
        presents = {name: named[name] for name in contract.cache.names("present")}
        self.past = {name.replace("present", "past_key_values", 1): value
                     for name, value in presents.items()}
        return StepOutput(named["logits"], presents)

    def _features(self, images: list[dict[str, np.ndarray]], empty: np.ndarray) -> np.ndarray:
        """The vision file once per image, in image-token order."""
        names = self.sessions.vision.input_names
        found = [run_session(self.sessions.vision, {name: image[name] for name in names})[0]
                 for image in images]
        return np.concatenate(found).astype(self.dtype) if found else empty
