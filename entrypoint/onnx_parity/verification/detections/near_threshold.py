"""Why one side alone has a detection: a near-tie of a threshold, or nothing (a defect).

The band of each threshold is what the image's matched pairs actually differ by (the largest
score difference, the largest IoU shortfall of a pair from 1), never below a float32 rounding
of the threshold itself (FLOAT_ULPS units in the last place: one op computed in float on one
side and in double on the other, torchvision's NMS against onnxruntime's). A defect moves many
detections by far more than that band, so it stays unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_parity.settings import Detections
from onnx_parity.verification.detections.images import ImageDetections
from onnx_parity.verification.detections.matching import iou

FLOAT_ULPS = 4


@dataclass(frozen=True)
class Noise:
    """What the matched pairs of one image differ by."""

    score: float
    iou: float


@dataclass(frozen=True)
class Side:
    """One side's detections of an image and the indices of those the other side lacks."""

    name: str
    detections: ImageDetections
    unmatched: tuple[int, ...]


def band(threshold: float, measured: float) -> float:
    return max(measured, FLOAT_ULPS * float(np.spacing(np.float32(threshold))))


def reasons(sides: tuple[Side, Side], noise: Noise, spec: Detections) -> dict[tuple[str, int],
                                                                            str]:
    """(side name, index) -> the threshold that explains it, for the unmatched that one does;
    then the cascade: an unmatched detection overlapping an explained one above the NMS band."""
    found: dict[tuple[str, int], str] = {}
    for side, other in (sides, sides[::-1]):
        for index in side.unmatched:
            reason = _direct(side.detections, index, other.detections, noise, spec)
            if reason is not None:
                found[(side.name, index)] = reason
    return _cascade(sides, found, noise, spec)


def _direct(side: ImageDetections, index: int, other: ImageDetections, noise: Noise,
            spec: Detections) -> str | None:
    score = float(side.scores[index])
    if spec.score_threshold is not None and abs(score - spec.score_threshold) <= band(
            spec.score_threshold, noise.score):
        return (f"score {score:.9g} within {band(spec.score_threshold, noise.score):.2g} of "
                f"score-threshold {spec.score_threshold:.9g}")
    if spec.nms_iou is not None:
        reason = _nms(side, index, other, noise, spec.nms_iou) or _tie(side, index, other,
                                                                       noise, spec.nms_iou)
        if reason is not None:
            return reason
    if spec.max_det is not None and len(side) >= spec.max_det:
        last = float(np.min(side.scores))
        if abs(score - last) <= band(last, noise.score) and len(other):
            return f"rank at the max-det cut ({spec.max_det}), score {score:.6g}"
    return None


def _nms(side: ImageDetections, index: int, other: ImageDetections, noise: Noise,
         nms_iou: float) -> str | None:
    """Its IoU with a box either side kept lies within the band of nms-iou."""
    width = band(nms_iou, noise.iou)
    box = side.boxes[index:index + 1]
    for where, boxes in (("the other side", other), ("its own side", side)):
        overlaps = iou(box, boxes.boxes)[0]
        if boxes is side:
            overlaps[index] = -1.0
        near = np.nonzero(np.abs(overlaps - nms_iou) <= width)[0]
        if near.size:
            return (f"IoU {float(overlaps[near[0]]):.10g} with a box kept on {where} within "
                    f"{width:.2g} of nms-iou {nms_iou:.9g}")
    return None


def _tie(side: ImageDetections, index: int, other: ImageDetections, noise: Noise,
         nms_iou: float) -> str | None:
    """It overlaps, above nms-iou, a box the other side kept in its place whose score ties its
    own: which of two equal scores NMS visits first is each runtime's sort order."""
    score = float(side.scores[index])
    overlaps = iou(side.boxes[index:index + 1], other.boxes)[0]
    ties = np.abs(other.scores - score) <= band(score, noise.score)
    near = np.nonzero(ties & (overlaps > nms_iou - band(nms_iou, noise.iou)))[0]
    if not near.size:
        return None
    return (f"score {score:.9g} ties that of a box it overlaps at IoU {overlaps[near[0]]:.4g} "
            "on the other side: NMS kept whichever of the two each runtime sorted first")


def _cascade(sides: tuple[Side, Side], found: dict[tuple[str, int], str], noise: Noise,
             spec: Detections) -> dict[tuple[str, int], str]:
    """Suppressed (or kept) only because a near-tie box was kept (or suppressed)."""
    if spec.nms_iou is None:
        return found
    limit = spec.nms_iou - band(spec.nms_iou, noise.iou)
    grew = True
    while grew:
        grew = False
        explained = [(s, i) for s in sides for i in s.unmatched if (s.name, i) in found]
        for side in sides:
            for index in side.unmatched:
                if (side.name, index) in found:
                    continue
                box = side.detections.boxes[index:index + 1]
                for s, i in explained:
                    if float(iou(box, s.detections.boxes[i:i + 1])[0, 0]) > limit:
                        found[(side.name, index)] = "cascade of a near-tie box it overlaps"
                        grew = True
                        break
    return found
