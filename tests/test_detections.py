"""A detector judged as detections (`[model.detections]`), through the real CLI on the tiny
pure-PyTorch detector of tests/fixture_repo/models/detect.py, and the matching rules alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, copy_repo, run_cli
from onnx_parity.settings import Column, ConfigError, Detections, ModelSpec, load_settings
from onnx_parity.verification.detections.images import ImageDetections, read_images
from onnx_parity.verification.detections.judged import RunPlace, judge_run
from onnx_parity.verification.detections.matching import match
from onnx_parity.verification.detections.near_threshold import Noise, Side, reasons

DETECTOR = """
[[model]]
name = "{name}"
factory = "models.detect:{factory}"
inputs = {{ images = "samples/images.npy" }}
outputs = ["boxes", "scores", "labels"]
dynamic-axes = {{ images = {{ 0 = "batch", 2 = "height", 3 = "width" }} }}
axis-sizes = {{ images = {{ 2 = [40, 56], 3 = [40, 64] }} }}
{extra}
"""
DECLARED = """
[model.detections]
boxes = "boxes"
scores = "scores"
labels = "labels"
score-threshold = {threshold}
nms-iou = {nms}
"""
CONFIG = "batch-sizes = [1, 2]\n" + "".join((
    DETECTOR.format(name="capped", factory="capped", extra=DECLARED.format(threshold=0.3, nms=0.5)),
    # The same model compared element by element: the swapped order is real.
    DETECTOR.format(name="capped-by-position", factory="capped", extra=""),
    DETECTOR.format(name="near-tie", factory="near_tie",
                    extra=DECLARED.format(threshold="0.41806708", nms=0.5)),
    DETECTOR.format(name="nms-tie", factory="nms_near_tie",
                    extra=DECLARED.format(threshold=0.3, nms="0.32020953")),
    DETECTOR.format(name="baked", factory="baked_scale",
                    extra='exporter = ["torchscript"]\n' + DECLARED.format(threshold=0.3, nms=0.5)),
))


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("detections")
    repo = copy_repo(root / "repo")
    images = np.random.default_rng(0).normal(0, 1, (2, 3, 48, 48)).astype(np.float32)
    (repo / "samples").mkdir(exist_ok=True)
    np.save(repo / "samples" / "images.npy", images)
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    done: CliRun = run_cli("check", cwd=repo, out=root / "out")
    assert done.code == 1, done.stderr  # the baked scale and the element-wise control fail
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    markdown = (root / "out" / "report.md").read_text(encoding="utf-8")
    return {**{model["name"]: model for model in report["models"]}, "markdown": markdown}


def _codes(model: dict, severity: str) -> list[str]:
    return [f["code"] for f in model["findings"] if f["severity"] == severity]


@pytest.mark.slow
def test_detections_in_swapped_order_pass_where_the_positions_differ(checked):
    control = checked["capped-by-position"]
    assert not control["passed"]  # tied scores: top-k orders them differently in each runtime
    assert "parity-mismatch" in _codes(control, "error")
    capped = checked["capped"]
    assert capped["passed"], capped["findings"]
    assert not {"shape-mismatch", "length-mismatch", "parity-mismatch"} & set(
        _codes(capped, "error") + _codes(capped, "warning"))
    images = capped["detections"]
    # every batch size and every length the sweep ran: 48 at batch 1 and 2, the others at both
    assert {tuple(image["shape"]) for image in images} == {
        (3, 48, 48), (3, 40, 48), (3, 56, 48), (3, 48, 40), (3, 48, 64)}
    assert {image["batch"] for image in images} == {1, 2}
    for image in images:
        assert image["matched"] == image["torch_count"] == image["onnx_count"] > 0
        assert image["min_iou"] > 0.9999
        assert image["max_box_diff"] < 1e-4
    row = next(line for line in checked["markdown"].splitlines() if "`capped`" in line)
    matched = sum(image["matched"] for image in images)
    assert f"detections: {matched} matched, 0 near threshold, 5 sizes" in row


@pytest.mark.slow
def test_a_score_cut_off_between_the_two_sides_sigmoids_is_a_near_threshold_warning(checked):
    model = checked["near-tie"]
    assert model["passed"], model["findings"]
    near = next(f for f in model["findings"] if f["code"] == "detection-near-threshold")
    assert near["severity"] == "warning"
    assert "PyTorch 15, onnxruntime 16, matched 15, near threshold 1" in near["message"]
    assert "only onnxruntime has box [" in near["message"]
    assert "of score-threshold 0.41806708" in near["message"]
    record = next(image for image in model["detections"] if image["near_threshold"])
    assert (record["onnx_only"], record["torch_only"]) == (1, 0)
    # the band is what the image's matched scores differ by (sigmoid's last bits), no wider
    assert 0 < record["max_score_diff"] < 2e-7


@pytest.mark.slow
def test_an_nms_iou_between_the_two_sides_overlaps_is_a_near_threshold_warning_at_every_size(
        checked):
    model = checked["nms-tie"]
    assert model["passed"], model["findings"]
    near = next(f for f in model["findings"] if f["code"] == "detection-near-threshold")
    assert "with a box kept on the other side within" in near["message"]
    assert "of nms-iou 0.32020953" in near["message"]
    tied = [image for image in model["detections"] if image["near_threshold"]]
    # the near-tie box sits at the image's top edge: every length and batch size keeps it
    assert {tuple(image["shape"]) for image in tied} == {
        (3, 48, 48), (3, 40, 48), (3, 56, 48), (3, 48, 40), (3, 48, 64)}
    for image in tied:
        assert (image["torch_count"] + 1, image["onnx_only"], image["near_threshold"]) == (
            image["onnx_count"], 1, 1)
        assert image["min_iou"] > 0.999999  # the band: 1 - 0.9999994, against a 2e-9 tie


@pytest.mark.slow
def test_a_width_baked_by_the_trace_is_a_detection_mismatch_naming_image_counts_and_box(checked):
    model = checked["baked"]
    assert not model["passed"]
    mismatch = next(f for f in model["findings"] if f["code"] == "detection-mismatch")
    assert mismatch["severity"] == "error"
    message = mismatch["message"]
    assert message.startswith("image 0 of batch ")
    assert "width 40" in message or "width 64" in message  # the export's 48 is right
    assert "PyTorch 24, onnxruntime 24" in message
    assert "PyTorch box [" in message
    assert "onnxruntime box [" in message
    assert all(image["passed"] for image in model["detections"] if image["shape"][2] == 48)


def _side(boxes: list[list[float]], scores: list[float]) -> ImageDetections:
    return ImageDetections(np.array(boxes, np.float64).reshape(-1, 4), np.array(scores), None)


def test_matching_pairs_by_iou_whatever_the_order() -> None:
    torch_side = _side([[0, 0, 10, 10], [20, 20, 30, 30]], [0.9, 0.8])
    onnx_side = _side([[20, 20, 30, 30.01], [0, 0, 10, 10]], [0.8, 0.9])
    found = match(torch_side, onnx_side, 0.5)
    assert sorted((i, j) for i, j, _ in found.pairs) == [(0, 1), (1, 0)]
    assert found.torch_only == found.onnx_only == ()


def test_an_unmatched_detection_is_near_the_threshold_only_within_the_measured_noise() -> None:
    spec = Detections(boxes=Column("boxes"), scores=Column("scores"), score_threshold=0.5,
                      nms_iou=0.6)
    torch_side = _side([[0, 0, 10, 10]], [0.9])
    onnx_side = _side([[0, 0, 10, 10], [40, 40, 50, 50]], [0.9, 0.5000001])
    sides = (Side("PyTorch", torch_side, ()), Side("onnxruntime", onnx_side, (1,)))
    assert reasons(sides, Noise(score=2e-7, iou=0.0), spec)[("onnxruntime", 1)].startswith(
        "score 0.5000001")
    # the same detection 0.01 above the cut-off, with matched pairs 2e-7 apart: a defect
    far = _side([[0, 0, 10, 10], [40, 40, 50, 50]], [0.9, 0.51])
    sides = (Side("PyTorch", torch_side, ()), Side("onnxruntime", far, (1,)))
    assert reasons(sides, Noise(score=2e-7, iou=0.0), spec) == {}


def test_an_nms_near_tie_and_its_cascade_are_explained() -> None:
    spec = Detections(boxes=Column("boxes"), scores=Column("scores"), nms_iou=0.6)
    # box 1 overlaps box 0 at IoU 0.6000000238 (float32's 0.6): suppressed by one NMS only;
    # box 2 overlaps box 1 (IoU 0.77) and box 0 at 0.55: PyTorch kept it as it lost box 1
    box0, box1 = [0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 6.000000238]
    box2 = [0.0, 1.0, 10.0, 6.5]
    torch_side = _side([box0, box2], [0.9, 0.7])
    onnx_side = _side([box0, box1], [0.9, 0.8])
    sides = (Side("PyTorch", torch_side, (1,)), Side("onnxruntime", onnx_side, (1,)))
    found = reasons(sides, Noise(score=0.0, iou=0.0), spec)
    assert "of nms-iou 0.6" in found[("onnxruntime", 1)]
    assert found[("PyTorch", 1)] == "cascade of a near-tie box it overlaps"


def test_packed_columns_and_padding_rows() -> None:
    spec = Detections(boxes=Column("output0", 0, 4), scores=Column("output0", 4),
                      labels=Column("output0", 5), box_format="cxcywh")
    packed = np.zeros((2, 3, 6), np.float32)
    packed[0, 0] = [5, 5, 10, 10, 0.9, 2]
    images = read_images({"output0": packed}, spec)
    assert [len(image) for image in images] == [1, 0]  # all-zero rows are padding
    assert images[0].boxes.tolist() == [[0, 0, 10, 10]]
    assert images[0].labels is not None
    assert images[0].labels.tolist() == [2]


def test_the_detections_table_is_checked_key_by_key(tmp_path: Path) -> None:
    config = ('[[model]]\nname = "m"\nfactory = "models.net:build"\ninputs = "s.npz"\n'
              '[model.detections]\nboxes = "output0[..., 0:4]"\nscores = "output0[..., 4]"\n')
    (tmp_path / "onnx-parity.toml").write_text(config, encoding="utf-8")
    declared = load_settings(tmp_path).models[0].detections
    assert declared == Detections(boxes=Column("output0", 0, 4), scores=Column("output0", 4))
    (tmp_path / "onnx-parity.toml").write_text(config + 'box-format = "xywh"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r'key "detections\.box-format": .xywh. is not a box'):
        load_settings(tmp_path)
    (tmp_path / "onnx-parity.toml").write_text(config + "match_iou = 0.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match='did you mean "match-iou"'):
        load_settings(tmp_path)


def test_class_logits_become_scores_and_labels_and_the_cut_off_drops_on_both_sides() -> None:
    spec = Detections(boxes=Column("pred_boxes"), scores=Column("logits"), box_format="cxcywh",
                      score_activation="sigmoid", score_threshold=0.5)
    logits = np.array([[[2.0, -1.0, 0.0], [-3.0, -2.0, -4.0]]], np.float32)  # (B, Q, C)
    boxes = np.array([[[0.5, 0.5, 0.2, 0.2], [0.3, 0.3, 0.1, 0.1]]], np.float32)
    (image,) = read_images({"pred_boxes": boxes, "logits": logits}, spec)
    assert len(image) == 1  # the second query's best class scores sigmoid(-2) < 0.5
    assert image.labels is not None
    assert image.labels.tolist() == [0]
    assert image.scores[0] == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert image.boxes[0].tolist() == pytest.approx([0.4, 0.4, 0.6, 0.6])


def test_a_detection_at_the_max_det_cut_is_a_near_tie_of_the_rank() -> None:
    spec = Detections(boxes=Column("boxes"), scores=Column("scores"), max_det=2)
    kept = _side([[0, 0, 10, 10], [20, 0, 30, 10]], [0.9, 0.40000001])
    other = _side([[0, 0, 10, 10], [40, 0, 50, 10]], [0.9, 0.40000003])
    sides = (Side("PyTorch", kept, (1,)), Side("onnxruntime", other, (1,)))
    found = reasons(sides, Noise(score=1e-7, iou=0.0), spec)
    assert found[("PyTorch", 1)].startswith("rank at the max-det cut (2)")
    assert found[("onnxruntime", 1)].startswith("rank at the max-det cut (2)")
    # the same ranks with more room below the cut: no near-tie, a defect
    roomy = Detections(boxes=Column("boxes"), scores=Column("scores"), max_det=3)
    assert reasons(sides, Noise(score=1e-7, iou=0.0), roomy) == {}


def test_pairs_outside_the_tolerance_do_not_widen_the_noise_band() -> None:
    declared = Detections(boxes=Column("boxes"), scores=Column("scores"), nms_iou=0.5)
    spec = dataclasses.replace(ModelSpec(name="m", factory="models.net:build", inputs={}),
                               detections=declared)
    torch_side = {"boxes": np.array([[0, 0, 10, 10], [50, 0, 60, 10]], np.float32),
                  "scores": np.array([0.9, 0.8], np.float32)}
    # onnxruntime: both boxes 1 px off (matched, IoU 0.82, outside box-atol 0.1), and one more
    # box overlapping the first at IoU 0.45: within 0.18 of nms-iou, far outside float noise
    onnx_side = {"boxes": np.array([[1, 0, 11, 10], [51, 0, 61, 10], [0, 0, 10, 4.5]],
                                   np.float32),
                 "scores": np.array([0.9, 0.8, 0.7], np.float32)}
    (image,) = judge_run(torch_side, onnx_side, spec, RunPlace(1, {}, (3, 64, 64)))
    assert (image.matched, image.outside, image.near_threshold) == (2, 2, 0)
    assert [u.side for u in image.lost] == ["onnxruntime"]
    assert not image.passed


def test_equal_scores_that_nms_visits_in_another_order_are_a_near_tie() -> None:
    spec = Detections(boxes=Column("boxes"), scores=Column("scores"), nms_iou=0.5)
    # two overlapping boxes (IoU 0.67) both scored 0.45: each side keeps the one it sorted first
    first, second = [0.0, 0.0, 10.0, 10.0], [2.0, 0.0, 12.0, 10.0]
    torch_side = _side([first], [0.45])
    onnx_side = _side([second], [0.45])
    sides = (Side("PyTorch", torch_side, (0,)), Side("onnxruntime", onnx_side, (0,)))
    found = reasons(sides, Noise(score=0.0, iou=0.0), spec)
    assert found[("PyTorch", 0)].startswith("score 0.45 ties that of a box it overlaps")
    # the same boxes with scores 0.01 apart: NMS's order is no tie, a defect
    apart = (sides[0], Side("onnxruntime", _side([second], [0.44]), (0,)))
    assert reasons(apart, Noise(score=0.0, iou=0.0), spec) == {}
