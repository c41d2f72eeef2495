"""A vision-language model's position thresholds crossed as a decoder's are
(generation/thresholds.py runs, compares and judges the steps; this module gives it the
pipeline's two sides).

The past is built (generation/threshold_past.py) from a text-only prompt: the first batch's
rows with their image tokens removed and left-padded again, through the user's model's own
forward. The steps then run as generated tokens do (decoding.py): PyTorch's TorchPipeline, the
model's own forward with its own cache kind holding the built past; onnxruntime's OnnxPipeline, the
embedding file for the token (no image features) then the decoder file with the built past.
Both get the positions generation gives after a text-only prefix: the mask's cumulative sum,
on all three rows where the family's positions are 3-D (Qwen2-VL); a decoder_extra input is
fed zeros, as after every prompt.
"""

from __future__ import annotations

import functools

import numpy as np

from onnx_parity.models import PositionLimits
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import position_ids
from onnx_parity.verification.generation.threshold_past import BuiltPast, PastSide, sides
from onnx_parity.verification.generation.thresholds import (
    Stepper,
    ThresholdCheck,
    ThresholdsChecked,
    crossed,
)
from onnx_parity.verification.generation.vision_language.decoding import (
    OnnxPipeline,
    PipelineSessions,
    PipelineSide,
    TorchPipeline,
    open_pipeline,
)
from onnx_parity.verification.runtime import Session


def check_vl_thresholds(decoders: Decoders, spec: ModelSpec, limits: PositionLimits,
                        session: Session | None) -> ThresholdsChecked:
    """The thresholds of a vision-language model's text config crossed through its embedding
    and decoder files, in the decoder session the generation check ran (None: the file did
    not run, which the generation check's findings say; nothing is crossed)."""
    pipeline = decoders.pipeline
    if pipeline is None or not limits.thresholds or session is None:
        return ThresholdsChecked()
    ids, mask, said = text_rows(pipeline, max(spec.batch_sizes))
    side = PastSide(decoders.module, pipeline.contract.cache, False, {}, decoders.dtype)
    sessions = open_pipeline(pipeline, spec.runtime_optimization, decoders.threads)
    return crossed(ThresholdCheck(side, session, (ids, mask), (spec.atol, spec.rtol),
                                  functools.partial(pipeline_sides, pipeline, sessions), said),
                   limits)


def text_rows(pipeline: PipelineSide, size: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The first `size` prompt rows without their image tokens, left-padded again (ids,
    mask), and how they were made."""
    prompts = pipeline.prompts
    ids = np.asarray(prompts["input_ids"])[:size].astype(np.int64)
    mask = np.asarray(prompts.get("attention_mask", np.ones_like(ids)))[:size].astype(np.int64)
    image = ids == pipeline.contract.image_token
    kept = [row[(row_mask > 0) & ~row_image] for row, row_mask, row_image in
            zip(ids, mask, image, strict=True)]
    width = max(1, max(len(row) for row in kept))
    text = np.zeros((len(kept), width), dtype=np.int64)
    text_mask = np.zeros_like(text)
    for index, row in enumerate(kept):
        text[index, width - len(row):] = row
        text_mask[index, width - len(row):] = 1
    removed = int((image & (mask > 0)).sum())
    said = (f"from the prompts' first {len(kept)} rows as text ({removed} image tokens "
            "removed, left-padded again): ")
    return text, text_mask, said


def pipeline_sides(pipeline: PipelineSide, sessions: PipelineSessions, side: PastSide,
                   session: Session, built: BuiltPast) -> tuple[Stepper, Stepper]:
    """TorchPipeline with the model's own cache holding the built past, OnnxPipeline with the
    built past as the decoder's; both at the prefix's last position, each step adding one."""
    torch_decoder, _ = sides(side, session, built)  # the model's own cache kind, filled
    last = position_ids(built.mask, 1)
    positions = (np.broadcast_to(last[None], (3, *last.shape)).copy()
                 if pipeline.contract.positions_3d else last)
    rows = slice(0, len(built.mask))
    return (TorchPipeline(side.module, pipeline, rows, cache=torch_decoder.cache,
                          positions=positions),
            OnnxPipeline(session, sessions, pipeline, side.module, rows, side.dtype,
                         positions=positions, past=dict(built.past)))
