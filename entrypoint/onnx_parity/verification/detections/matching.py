"""Two sides' detections of one image matched by IoU: per label, greedily, best IoU first.

Pure numpy. Greedy matching is what COCO evaluation does; with both sides computing the same
model the pairs are unambiguous (IoU above 0.99 against well under `match-iou` to any other).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_parity.verification.detections.images import ImageDetections


@dataclass(frozen=True)
class Matching:
    """Index pairs (PyTorch's, onnxruntime's) with their IoU, and each side's unmatched."""

    pairs: tuple[tuple[int, int, float], ...]
    torch_only: tuple[int, ...]
    onnx_only: tuple[int, ...]


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of `a` (N, 4) with every box of `b` (M, 4), xyxy: (N, M)."""
    low = np.maximum(a[:, None, :2], b[None, :, :2])
    high = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(high - low, 0, None), axis=-1)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=-1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=-1)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def match(torch_side: ImageDetections, onnx_side: ImageDetections, match_iou: float) -> Matching:
    """Greedy per label: the pair of highest IoU first, each detection used once."""
    overlaps = iou(torch_side.boxes, onnx_side.boxes)
    if torch_side.labels is not None and onnx_side.labels is not None:
        overlaps = np.where(torch_side.labels[:, None] == onnx_side.labels[None, :], overlaps,
                            -1.0)
    pairs: list[tuple[int, int, float]] = []
    free = overlaps.copy()
    while free.size and free.max() >= match_iou and free.max() >= 0:
        i, j = np.unravel_index(int(np.argmax(free)), free.shape)
        pairs.append((int(i), int(j), float(overlaps[i, j])))
        free[i, :], free[:, j] = -1.0, -1.0
    matched_torch = {i for i, _, _ in pairs}
    matched_onnx = {j for _, j, _ in pairs}
    return Matching(tuple(pairs),
                    tuple(i for i in range(len(torch_side)) if i not in matched_torch),
                    tuple(j for j in range(len(onnx_side)) if j not in matched_onnx))
