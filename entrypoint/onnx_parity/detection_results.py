"""What the check of a detector (`[model.detections]`) found for one image, which results.py's
ModelResult holds: its detections matched by IoU between PyTorch and onnxruntime (results.py
owns this module; it imports nothing of the package)."""

from __future__ import annotations

from dataclasses import dataclass

Box = tuple[float, float, float, float]  # x1, y1, x2, y2


@dataclass(frozen=True)
class Detection:
    """One detection as one side returned it."""

    box: Box
    score: float
    label: int | None


@dataclass(frozen=True)
class MatchedPair:
    """The worst matched pair of an image: both sides' detections, their IoU and score diff."""

    torch: Detection
    onnx: Detection
    iou: float
    score_diff: float
    box_diff: float  # the largest coordinate difference


@dataclass(frozen=True)
class Unmatched:
    """A detection one side alone has; `reason` is the threshold that explains it (None: none)."""

    side: str  # "PyTorch" or "onnxruntime": the side that has it
    detection: Detection
    reason: str | None


@dataclass(frozen=True)
class DetectionImage:
    """One image of one run, both sides' detections matched: counts, the worst pair, the
    detections one side alone has, and the noise the matched pairs measured."""

    batch: int  # the batch size of the run
    image: int  # the image's row in the batch
    shape: tuple[int, ...]  # the image's input shape
    dimensions: dict[str, int]  # the declared dimensions' lengths of the run
    torch_count: int
    onnx_count: int
    matched: int
    worst: MatchedPair | None
    unmatched: tuple[Unmatched, ...]
    # matched pairs outside box-atol or the scores' tolerance
    outside: int = 0
    min_iou: float | None = None
    max_box_diff: float | None = None
    max_score_diff: float | None = None

    @property
    def near_threshold(self) -> int:
        return sum(1 for u in self.unmatched if u.reason is not None)

    @property
    def lost(self) -> tuple[Unmatched, ...]:
        """The unmatched detections no threshold explains."""
        return tuple(u for u in self.unmatched if u.reason is None)

    @property
    def passed(self) -> bool:
        return not self.lost and not self.outside

    def only(self, side: str) -> int:
        return sum(1 for u in self.unmatched if u.side == side)
