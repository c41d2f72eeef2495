"""The key of a detector: `[model.detections]`, which outputs hold its boxes, scores and labels.

Each of its keys is declared once, as a field of `Detections` made by `setting(...)` (the same
declaration ModelSpec's keys use), so the check, the default, the reason for it and the
generated reference (docs/reference/configuration.md) come from one place.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from onnx_parity.settings.declaration import DECLARED, Declaration, Key, choices, setting
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    did_you_mean,
    dotted,
    finite_number,
    integer,
    string,
    wrong_type,
)

BOX_FORMATS = ("xyxy", "cxcywh")
SCORE_ACTIVATIONS = ("none", "sigmoid", "softmax")
# `name`, `name[..., 4]` or `name[..., 0:4]`: an output, or columns of its last axis.
_COLUMN = re.compile(r"(?P<name>[^\[\]]+?)\s*(\[\s*\.\.\.\s*,\s*(?P<start>\d+)\s*"
                     r"(:\s*(?P<stop>\d+)\s*)?\])?")
_COLUMN_FIX = ('an output name, or columns of its last axis: "boxes", "output0[..., 0:4]", '
               '"output0[..., 4]"')


@dataclass(frozen=True)
class Column:
    """An output by name, or a range of its last axis (a packed output such as ultralytics'
    (B, max_det, 6)); `index` is True for `name[..., 4]`, which drops that axis."""

    output: str
    start: int | None = None
    stop: int | None = None

    @property
    def index(self) -> bool:
        return self.start is not None and self.stop is None

    def __str__(self) -> str:
        if self.start is None:
            return self.output
        return f"{self.output}[..., {self.start}{'' if self.stop is None else f':{self.stop}'}]"


def _column(value: object, context: KeyContext) -> Column:
    text = string(value, context.where, _COLUMN_FIX)
    match = _COLUMN.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"{context.where}: {text!r} is not {_COLUMN_FIX}.")
    start, stop = match["start"], match["stop"]
    if start is not None and stop is not None and int(stop) <= int(start):
        raise ConfigError(f"{context.where}: {text!r} selects no column; write start < stop.")
    return Column(match["name"], None if start is None else int(start),
                  None if stop is None else int(stop))


def _optional_column(value: object, context: KeyContext) -> Column | None:
    return _column(value, context)


def _box_format(value: object, context: KeyContext) -> str:
    text = string(value, context.where, f"one of {choices(BOX_FORMATS)}")
    if text not in BOX_FORMATS:
        raise ConfigError(f"{context.where}: {text!r} is not a box format"
                          f"{did_you_mean(text, BOX_FORMATS)} Write one of {choices(BOX_FORMATS)}.")
    return text


def _score_activation(value: object, context: KeyContext) -> str:
    text = string(value, context.where, f"one of {choices(SCORE_ACTIVATIONS)}")
    if text not in SCORE_ACTIVATIONS:
        raise ConfigError(f"{context.where}: {text!r} is not a score activation"
                          f"{did_you_mean(text, SCORE_ACTIVATIONS)} Write one of "
                          f"{choices(SCORE_ACTIVATIONS)}.")
    return text


def _fraction(value: object, context: KeyContext) -> float:
    number = float(finite_number(value, context.where, "a number between 0 and 1, e.g. 0.5"))
    if not 0 <= number <= 1:
        raise ConfigError(f"{context.where}: {number:g} is not between 0 and 1.")
    return number


def _optional_fraction(value: object, context: KeyContext) -> float | None:
    return _fraction(value, context)


def _box_atol(value: object, context: KeyContext) -> float:
    number = float(finite_number(value, context.where, "a number >= 0, e.g. 0.1"))
    if number < 0:
        raise ConfigError(f"{context.where}: {number:g} is below 0.")
    return number


def _max_det(value: object, context: KeyContext) -> int | None:
    count = integer(value, context.where, "a whole number >= 1, e.g. 100")
    if count < 1:
        raise ConfigError(f"{context.where}: {count} is below 1.")
    return count


@dataclass(frozen=True, kw_only=True)
class Detections:
    """How a detector's outputs are read and matched (`[model.detections]`)."""

    boxes: Column = setting(
        "boxes", kind="string", check=_column, example='boxes = "boxes"',
        doc='The output holding the boxes, (N, 4) or (B, N, 4), or columns of a packed one '
            '(`"output0[..., 0:4]"`).')
    scores: Column = setting(
        "scores", kind="string", check=_column, example='scores = "scores"',
        doc="The output holding each box's score, (N,) or (B, N), or a column of a packed one.")
    labels: Column | None = setting(
        "labels", None, kind="string", check=_optional_column, shown="none (class-agnostic)",
        example='labels = "labels"',
        doc="The output holding each box's class; without it every box is matched against "
            "every other, whatever its class.")
    box_format: str = setting(
        "box-format", "xyxy", kind=f"one of {choices(BOX_FORMATS)}", check=_box_format,
        example='box-format = "cxcywh"',
        doc="`xyxy` (corners, torchvision's and NMS's layout) or `cxcywh` (centre and size, "
            "DETR's); pixels or normalised, as long as `box-atol` is in the same unit. The "
            "default is the layout torchvision, SSD and YOLO's NMS exports return.")
    score_activation: str = setting(
        "score-activation", "none", kind=f"one of {choices(SCORE_ACTIVATIONS)}",
        check=_score_activation, example='score-activation = "sigmoid"',
        doc="`none`: `scores` holds one score per detection. `sigmoid` or `softmax`: it holds "
            "class logits (N, C) or (B, N, C), as a fixed-query DETR-style head returns them "
            "(`logits` beside `pred_boxes`); each detection's score is the highest class "
            "probability and its label that class (`softmax` leaves out the last class, DETR's "
            "no-object). The default reads the scores of NMS exports, torchvision's and YOLO's.")
    score_threshold: float | None = setting(
        "score-threshold", None, kind="number in [0, 1]", check=_optional_fraction,
        shown="none", example="score-threshold = 0.05",
        doc="The model's score cut-off: detections scored below it are left out on both sides "
            "(a DETR-style head's post-processing), and a detection one side alone has whose "
            "score lies within the image's measured score noise of it is a near-tie "
            "(`detection-near-threshold`), not a defect. No default: only the model knows it.")
    nms_iou: float | None = setting(
        "nms-iou", None, kind="number in [0, 1]", check=_optional_fraction, shown="none",
        example="nms-iou = 0.5",
        doc="The model's NMS IoU threshold: a detection one side alone has whose IoU with a box "
            "the other side kept lies within the image's measured IoU noise of it is a near-tie. "
            "No default: only the model knows it.")
    max_det: int | None = setting(
        "max-det", None, kind="integer >= 1", check=_max_det, shown="none",
        example="max-det = 100",
        doc="The most detections the model keeps per image: a detection one side alone has at "
            "that rank, whose score ties the other side's last within the noise, is a near-tie.")
    match_iou: float = setting(
        "match-iou", 0.5, kind="number in [0, 1]", check=_fraction, example="match-iou = 0.7",
        doc="Two detections of one image and label match when their IoU is at least this "
            "(greedily, best IoU first). 0.5 is the COCO convention; float noise keeps a real "
            "pair's IoU above 0.99, so the choice decides only what a defect is reported as.")
    box_atol: float = setting(
        "box-atol", 0.1, kind="number >= 0", check=_box_atol, example="box-atol = 0.01",
        doc="How far a matched box's coordinates may differ, in the boxes' own unit (the "
            "model's `atol` judges the scores). 0.1 is 2.5 times the 0.04 px float noise "
            "measured on a Faster R-CNN at 320 px; with normalised boxes write about 1e-4.")


_FIELDS = tuple(f for f in dataclasses.fields(Detections) if DECLARED in f.metadata)


def detection_keys() -> tuple[Key, ...]:
    """Every key of `[model.detections]`, in declaration order (for the reference page)."""
    return tuple(Key(field=f.name, **f.metadata[DECLARED]) for f in _FIELDS)


def detections_value(value: object, context: KeyContext) -> Detections:
    if not isinstance(value, dict):
        raise wrong_type(context.where, value, 'a table, e.g. [model.detections] with boxes = '
                         '"boxes" and scores = "scores"')
    names = tuple(key.name for key in detection_keys())
    unknown = [name for name in value if name not in names]
    if unknown:
        raise ConfigError(f"{context.place.at(dotted(context.key, unknown[0]))}: not a key of "
                          f"`detections`{did_you_mean(unknown[0], names)} Its keys are "
                          f"{', '.join(names)}.")
    read: dict[str, Any] = {}
    for key in detection_keys():
        if key.name in value:
            inner = KeyContext(context.place, dotted(context.key, key.name), context.root, value)
            read[key.field] = key.read(value[key.name], inner)
        elif key.default is None and key.name in ("boxes", "scores"):
            raise ConfigError(f"{context.where}: `{key.name}` is missing; name the output that "
                              f"holds them, e.g. {key.example}.")
    return Detections(**read)


# The key's declaration, in settings/schema.py's ModelSpec: `setting("detections", None, ...)`.
DETECTIONS_KEY: Declaration = {
    "kind": "table { boxes, scores, labels, box-format, score-activation, score-threshold, "
            "nms-iou, max-det, match-iou, box-atol }",
    "check": detections_value, "shown": "none (outputs compared element by element)",
    "model_only": True,
    "example": 'detections = { boxes = "boxes", scores = "scores", labels = "labels" }',
    "doc": "Declares a detector: the outputs named here are matched per image and per label by "
           "IoU instead of element by element, so a differing count or order of detections is "
           "judged as detections (`detection-mismatch`, or `detection-near-threshold` for one "
           "a score cut-off, NMS or `max-det` near-tie explains). Its keys are listed below "
           "(`[model.detections]` keys); see docs/detectors.md."}
