"""One run of a detector judged as detections: every image of the batch matched, each
unmatched detection explained by a near-tie or not, the figures kept as a DetectionImage.

The entry the core's cuts.py calls for a model with `[model.detections]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from onnx_parity.detection_results import (
    Detection,
    DetectionImage,
    MatchedPair,
    Unmatched,
)
from onnx_parity.settings import Detections, ModelSpec
from onnx_parity.verification.detections.images import ImageDetections, read_images
from onnx_parity.verification.detections.matching import Matching, match
from onnx_parity.verification.detections.near_threshold import Noise, Side, reasons

TORCH, ONNX = "PyTorch", "onnxruntime"


@dataclass(frozen=True)
class RunPlace:
    """Where a run stands: its batch size, the declared dimensions' lengths, one image's shape."""

    batch: int
    dimensions: dict[str, int]
    shape: tuple[int, ...]


def judge_run(torch_values: Mapping[str, np.ndarray], onnx_values: Mapping[str, np.ndarray],
              spec: ModelSpec, place: RunPlace) -> tuple[DetectionImage, ...]:
    """Each image of the run; ValueError when the outputs hold no detections as declared."""
    detections = _declared(spec)
    torch_images = read_images(torch_values, detections)
    onnx_images = read_images(onnx_values, detections)
    if len(torch_images) != len(onnx_images):
        raise ValueError(f"PyTorch returned detections of {len(torch_images)} image(s), "
                         f"onnxruntime of {len(onnx_images)}")
    return tuple(_image(row, pair, spec, place)
                 for row, pair in enumerate(zip(torch_images, onnx_images, strict=True)))


def _declared(spec: ModelSpec) -> Detections:
    if spec.detections is None:
        raise ValueError("the model declares no [model.detections]")
    return spec.detections


def _image(row: int, sides: tuple[ImageDetections, ImageDetections], spec: ModelSpec,
           place: RunPlace) -> DetectionImage:
    detections = _declared(spec)
    torch_side, onnx_side = sides
    matching = match(torch_side, onnx_side, detections.match_iou)
    pairs = [_pair(torch_side, onnx_side, i, j, overlap) for i, j, overlap in matching.pairs]
    outside = [p for p in pairs if p.box_diff > detections.box_atol
               or p.score_diff > spec.atol + spec.rtol * abs(p.torch.score)]
    # The noise band: what the pairs that agree differ by (a defect's pairs would widen it
    # until it swallowed the defect's lost detections too).
    agree = [p for p in pairs if p not in outside]
    noise = Noise(max((p.score_diff for p in agree), default=0.0),
                  max((1.0 - p.iou for p in agree), default=0.0))
    explained = reasons((Side(TORCH, torch_side, matching.torch_only),
                         Side(ONNX, onnx_side, matching.onnx_only)), noise, detections)
    worst = (max(outside, key=lambda p: p.box_diff) if outside
             else min(pairs, key=lambda p: p.iou, default=None))
    return DetectionImage(
        batch=place.batch, image=row, shape=place.shape, dimensions=dict(place.dimensions),
        torch_count=len(torch_side), onnx_count=len(onnx_side), matched=len(pairs),
        worst=worst, unmatched=_unmatched(sides, matching, explained), outside=len(outside),
        min_iou=min((p.iou for p in pairs), default=None),
        max_box_diff=max((p.box_diff for p in pairs), default=None),
        max_score_diff=max((p.score_diff for p in pairs), default=None))


def _detection(side: ImageDetections, index: int) -> Detection:
    box = side.boxes[index]
    return Detection((float(box[0]), float(box[1]), float(box[2]), float(box[3])),
                     float(side.scores[index]),
                     None if side.labels is None else int(side.labels[index]))


def _pair(torch_side: ImageDetections, onnx_side: ImageDetections, i: int, j: int,
          overlap: float) -> MatchedPair:
    return MatchedPair(_detection(torch_side, i), _detection(onnx_side, j), overlap,
                       abs(float(torch_side.scores[i]) - float(onnx_side.scores[j])),
                       float(np.max(np.abs(torch_side.boxes[i] - onnx_side.boxes[j]))))


def _unmatched(sides: tuple[ImageDetections, ImageDetections], matching: Matching,
               explained: dict[tuple[str, int], str]) -> tuple[Unmatched, ...]:
    torch_side, onnx_side = sides
    return (*(Unmatched(TORCH, _detection(torch_side, i), explained.get((TORCH, i)))
              for i in matching.torch_only),
            *(Unmatched(ONNX, _detection(onnx_side, j), explained.get((ONNX, j)))
              for j in matching.onnx_only))
