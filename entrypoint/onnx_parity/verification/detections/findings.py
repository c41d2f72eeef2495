"""A detector's judged images as findings: `detection-mismatch` (an error) for the images with
a detection no threshold explains or a matched pair outside its tolerance, and
`detection-near-threshold` (a warning) counting those a near-tie explains."""

from __future__ import annotations

from collections.abc import Sequence

from onnx_parity.detection_results import Detection, DetectionImage, MatchedPair
from onnx_parity.findings import Finding


def detection_findings(images: Sequence[DetectionImage], errors: Sequence[str]) -> list[Finding]:
    """`errors`: runs whose outputs held no detections as declared (the first one is told)."""
    findings: list[Finding] = []
    if errors:
        findings.append(Finding("detection-mismatch", f"the detection outputs could not be read "
                                f"as declared in [model.detections]: {errors[0]}",
                                fix="Name the outputs that hold the boxes and scores (see the "
                                    "outputs in the report), or their columns."))
    failing = [image for image in images if not image.passed]
    if failing:
        findings.append(_mismatch(failing[0], len(failing), len(images)))
    near = [image for image in images if image.near_threshold]
    if near:
        findings.append(_near(near, len(images)))
    return findings


def _where(image: DetectionImage) -> str:
    lengths = "".join(f", {name} {size}" for name, size in image.dimensions.items())
    shape = "x".join(str(n) for n in image.shape)
    return f"image {image.image} of batch {image.batch} ({shape}{lengths})"


def _counts(image: DetectionImage) -> str:
    return (f"PyTorch {image.torch_count}, onnxruntime {image.onnx_count}, matched "
            f"{image.matched}, near threshold {image.near_threshold}")


def _mismatch(image: DetectionImage, failing: int, total: int) -> Finding:
    lost = image.lost
    if lost:
        evidence = "; ".join(f"only {u.side} has {_shown(u.detection)}" for u in lost[:3])
        if len(lost) > 3:
            evidence += f"; {len(lost) - 3} more unmatched"
    else:
        evidence = f"{image.outside} matched pair(s) outside the tolerance, the worst " + (
            _pair(image.worst) if image.worst else "")
    return Finding(
        "detection-mismatch",
        f"{_where(image)}: {_counts(image)}: {evidence} ({failing} of {total} image run(s) "
        "differ)",
        details={"batches": [image.batch], "image": image.image})


def _near(images: list[DetectionImage], total: int) -> Finding:
    first = images[0]
    explained = next(u for u in first.unmatched if u.reason is not None)
    count = sum(image.near_threshold for image in images)
    return Finding(
        "detection-near-threshold",
        f"{count} detection(s) in {len(images)} of {total} image run(s) one side alone has, "
        f"each explained by a threshold's near-tie; first {_where(first)}: {_counts(first)}: "
        f"only {explained.side} has {_shown(explained.detection)}: {explained.reason}",
        details={"batches": sorted({image.batch for image in images}), "near_threshold": count})


def _shown(detection: Detection) -> str:
    box = ", ".join(f"{value:.4g}" for value in detection.box)
    label = "" if detection.label is None else f", label {detection.label}"
    return f"box [{box}] (score {detection.score:.6g}{label})"


def _pair(pair: MatchedPair) -> str:
    return (f"PyTorch {_shown(pair.torch)} against onnxruntime {_shown(pair.onnx)}: IoU "
            f"{pair.iou:.6f}, box diff {pair.box_diff:.3g}, score diff {pair.score_diff:.3g}")
