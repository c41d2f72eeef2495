"""A detector's images as report.json writes and reads them (`detections`, one record per image
of every run: counts, the matched pairs' worst figures, and the detections one side alone has).
"""

from __future__ import annotations

from typing import TypeAlias, TypedDict

from onnx_parity.detection_results import (
    Detection,
    DetectionImage,
    MatchedPair,
    Unmatched,
)
from onnx_parity.report.json_figures import (
    figure_from_json,
    figure_to_json,
    number_from_json,
    number_to_json,
)

# A measured figure as json_figures writes it: a detector's NaN box or score is "nan".
Measured: TypeAlias = float | str


class DetectionJson(TypedDict):
    box: list[Measured]  # x1, y1, x2, y2
    score: Measured
    label: int | None


class UnmatchedJson(TypedDict):
    side: str  # "PyTorch" or "onnxruntime": the side that has it
    detection: DetectionJson
    reason: str | None  # the near-tie that explains it (None: a mismatch)


class PairJson(TypedDict):
    torch: DetectionJson
    onnx: DetectionJson
    iou: Measured
    score_diff: Measured
    box_diff: Measured


class DetectionImageJson(TypedDict):
    batch: int  # the run's batch size
    image: int  # the image's row in the batch
    shape: list[int]  # the image's input shape
    dimensions: dict[str, int]  # the declared dimensions' lengths of the run
    torch_count: int
    onnx_count: int
    matched: int
    torch_only: int
    onnx_only: int
    near_threshold: int  # of the unmatched, those a near-tie explains
    outside: int  # matched pairs outside box-atol or the scores' tolerance
    min_iou: Measured | None
    max_box_diff: Measured | None
    max_score_diff: Measured | None
    passed: bool
    worst: PairJson | None  # the matched pair of lowest IoU (or the worst outside)
    unmatched: list[UnmatchedJson]


def detections_to_json(images: tuple[DetectionImage, ...]) -> list[DetectionImageJson]:
    return [_image(image) for image in images]


def _image(image: DetectionImage) -> DetectionImageJson:
    return {"batch": image.batch, "image": image.image, "shape": list(image.shape),
            "dimensions": dict(image.dimensions), "torch_count": image.torch_count,
            "onnx_count": image.onnx_count, "matched": image.matched,
            "torch_only": image.only("PyTorch"), "onnx_only": image.only("onnxruntime"),
            "near_threshold": image.near_threshold, "outside": image.outside,
            "min_iou": number_to_json(image.min_iou),
            "max_box_diff": number_to_json(image.max_box_diff),
            "max_score_diff": number_to_json(image.max_score_diff), "passed": image.passed,
            "worst": _pair(image.worst) if image.worst else None,
            "unmatched": [{"side": u.side, "detection": _detection(u.detection),
                           "reason": u.reason} for u in image.unmatched]}


def _detection(detection: Detection) -> DetectionJson:
    return {"box": [figure_to_json(x) for x in detection.box],
            "score": figure_to_json(detection.score), "label": detection.label}


def _pair(pair: MatchedPair) -> PairJson:
    return {"torch": _detection(pair.torch), "onnx": _detection(pair.onnx),
            "iou": figure_to_json(pair.iou), "score_diff": figure_to_json(pair.score_diff),
            "box_diff": figure_to_json(pair.box_diff)}


def detections_from_json(data: list[DetectionImageJson]) -> tuple[DetectionImage, ...]:
    return tuple(DetectionImage(
        batch=item["batch"], image=item["image"], shape=tuple(item["shape"]),
        dimensions=dict(item["dimensions"]), torch_count=item["torch_count"],
        onnx_count=item["onnx_count"], matched=item["matched"],
        worst=_pair_from(item["worst"]) if item["worst"] else None,
        unmatched=tuple(Unmatched(u["side"], _detection_from(u["detection"]), u["reason"])
                        for u in item["unmatched"]),
        outside=item["outside"], min_iou=number_from_json(item["min_iou"]),
        max_box_diff=number_from_json(item["max_box_diff"]),
        max_score_diff=number_from_json(item["max_score_diff"])) for item in data)


def _detection_from(data: DetectionJson) -> Detection:
    x1, y1, x2, y2 = (figure_from_json(x) for x in data["box"])
    return Detection((x1, y1, x2, y2), figure_from_json(data["score"]), data["label"])


def _pair_from(data: PairJson) -> MatchedPair:
    return MatchedPair(_detection_from(data["torch"]), _detection_from(data["onnx"]),
                       figure_from_json(data["iou"]), figure_from_json(data["score_diff"]),
                       figure_from_json(data["box_diff"]))


def detections_row(images: tuple[DetectionImage, ...]) -> str | None:
    """The comment's row: "detections: 100 matched, 2 near threshold, 5 sizes" (None: no
    detector). A size is one image shape the sweep ran (at any batch size)."""
    if not images:
        return None
    matched = sum(image.matched for image in images)
    near = sum(image.near_threshold for image in images)
    sizes = len({image.shape for image in images})
    lost = sum(len(image.lost) for image in images)
    text = f"detections: {matched} matched, {near} near threshold, {sizes} sizes"
    return text + (f", {lost} unmatched" if lost else "")
