"""Each image's detections read from a detector's outputs, by `[model.detections]`'s names.

An output of (N, ...) is one image's; (B, N, ...) is B images'. A packed output's columns are
cut from its last axis; class logits (`score-activation`) become a score and a label. Rows
that are all zero (the padding to `max_det` of a fixed-size export) and detections scored
below `score-threshold` are dropped. Boxes become xyxy in float64, so one IoU rule serves
every format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from onnx_parity.settings import Column, Detections


@dataclass(frozen=True)
class ImageDetections:
    """One image's detections on one side: boxes (N, 4) xyxy, scores (N,), labels (N,) or None."""

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray | None

    def __len__(self) -> int:
        return int(self.scores.shape[0])


def detection_outputs(spec: Detections) -> frozenset[str]:
    """The outputs judged as detections, not element by element."""
    columns = (spec.boxes, spec.scores, spec.labels)
    return frozenset(column.output for column in columns if column is not None)


def read_images(values: Mapping[str, np.ndarray], spec: Detections) -> list[ImageDetections]:
    """Every image's detections; a missing output or a shape that is no detections raises
    ValueError with what was found."""
    boxes = _cut(values, spec.boxes)
    scores = _cut(values, spec.scores)
    labels = _cut(values, spec.labels) if spec.labels is not None else None
    if spec.score_activation != "none":  # class logits: the best class's probability
        scores, labels = _from_logits(scores, spec.score_activation)
    if boxes.ndim == 2:
        boxes, scores = boxes[None], scores[None]
        labels = labels[None] if labels is not None else None
    if boxes.ndim != 3 or boxes.shape[-1] != 4 or scores.shape != boxes.shape[:2] or (
            labels is not None and labels.shape != scores.shape):
        raise ValueError(f"boxes {list(boxes.shape)}, scores {list(scores.shape)} are not "
                         "(N, 4) and (N,), nor (B, N, 4) and (B, N)")
    return [_image(boxes[row], scores[row], None if labels is None else labels[row], spec)
            for row in range(boxes.shape[0])]


def _from_logits(logits: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """Scores and labels from class logits (..., C), in float64 so both sides round alike."""
    values = logits.astype(np.float64)
    if activation == "sigmoid":
        probabilities = 1.0 / (1.0 + np.exp(-values))
    else:  # softmax, DETR's last class (no object) left out
        shifted = np.exp(values - values.max(axis=-1, keepdims=True))
        probabilities = (shifted / shifted.sum(axis=-1, keepdims=True))[..., :-1]
    return probabilities.max(axis=-1), probabilities.argmax(axis=-1)


def _cut(values: Mapping[str, np.ndarray], column: Column) -> np.ndarray:
    if column.output not in values:
        raise ValueError(f'no output "{column.output}" (outputs: {sorted(values)})')
    value = np.asarray(values[column.output])
    if column.start is None:
        return value
    if column.index:
        return value[..., column.start]
    return value[..., column.start:column.stop]


def _image(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray | None,
           spec: Detections) -> ImageDetections:
    boxes = boxes.astype(np.float64)
    scores = scores.astype(np.float64)
    keep = boxes.any(axis=-1) | (scores != 0)  # all-zero rows are padding
    if spec.score_threshold is not None:  # below the cut-off: no detection on either side
        keep &= scores >= spec.score_threshold
    boxes, scores = boxes[keep], scores[keep]
    labels = labels[keep].astype(np.int64) if labels is not None else None
    if spec.box_format == "cxcywh":
        centre, size = boxes[:, :2], boxes[:, 2:]
        boxes = np.concatenate((centre - size / 2, centre + size / 2), axis=-1)
    return ImageDetections(boxes, scores, labels)
