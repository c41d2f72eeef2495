"""A NaN or an infinity in any figure never costs the run (issue 34, §4): every JSON file stays
strict JSON with the figure as "nan", "inf" or "-inf", reads back as that float, and every
renderer shows it. The whole path through the CLI is tests/test_generation_nonfinite.py."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

from onnx_parity.detection_results import Detection, DetectionImage, MatchedPair, Unmatched
from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding
from onnx_parity.generation_results import (
    FileCheck,
    FullPrefix,
    GenerationResult,
    PipelineChecks,
    PrefixLength,
    TextScore,
    ThresholdRun,
    ThresholdStep,
    TokenDifference,
)
from onnx_parity.report import (
    render_junit,
    render_markdown,
    render_sarif,
    run_from_json,
    run_to_json,
    verdict_table,
)
from onnx_parity.report.generation.generation_table import generation_lines
from onnx_parity.report.json_values import DETAIL_FIGURES
from onnx_parity.report.merging import merge_runs
from onnx_parity.results import ModelResult, RunResult, Shard, VariantResult

FIXTURE = Path(__file__).parent / "expected" / "seed-failures.report.json"
NAN, INF = math.nan, math.inf


def nonfinite_generation() -> GenerationResult:
    """Every figure of a generating model's record NaN or infinite."""
    return GenerationResult(
        steps=3, rows=2, tokens_agree=(1, 3),
        first_token_difference=TokenDifference(1, 0, 7, 0, logit_diff=INF, margin=NAN,
                                               near_tie=False),
        max_logit_diff=(1e-7, INF, NAN), teacher_forced_from=2,
        thresholds=(ThresholdRun("sliding_window", 4, (), (ThresholdStep(3, INF, 1, 2, (0,)),),
                                 built="presents"),),
        pipeline=PipelineChecks("qwen2-vl", ("m.vision.onnx",),
                                (FileCheck("vision", "1x4x6", (4, 8), -INF, False),)),
        full_prefix=FullPrefix((PrefixLength(9, None, INF, NAN, 1, 2, (0,)),)))


def nonfinite_model(model: ModelResult) -> ModelResult:
    finding = Finding("generation-mismatch", "tokens differ", details={
        "step": 1, "logit_diff": INF, "margin": NAN, "max_abs_diff": -INF})
    variant = VariantResult("int8-dynamic", 1000, size_bytes=400, text=TextScore(
        "eval.npy", 2, 10, fp32_nll=NAN, nll=INF, top1_agreement=NAN))
    box = Detection((0.0, NAN, 4.0, INF), NAN, 1)
    image = DetectionImage(1, 0, (3, 8, 8), {}, 1, 2, 1, MatchedPair(box, box, NAN, INF, NAN),
                           (Unmatched("onnxruntime", box, None),), min_iou=NAN,
                           max_box_diff=INF)
    return dataclasses.replace(model, generation=nonfinite_generation(), variants=(variant,),
                               findings=(*model.findings, finding), detections=(image,))


def nonfinite_run() -> RunResult:
    run = run_from_json(json.loads(FIXTURE.read_text(encoding="utf-8")))
    return dataclasses.replace(run, models=(nonfinite_model(run.models[0]), *run.models[1:]))


def test_every_nonfinite_figure_is_strict_json_text_and_reads_back_as_that_float() -> None:
    run = nonfinite_run()
    text = json.dumps(run_to_json(run), indent=2, allow_nan=False)  # raised before
    record = json.loads(text)["models"][0]
    generation = record["generation"]
    assert generation["max_logit_diff"] == [1e-7, "inf", "nan"]
    assert generation["first_token_difference"]["logit_diff"] == "inf"
    assert generation["first_token_difference"]["margin"] == "nan"
    assert generation["thresholds"][0]["steps"][0]["max_logit_diff"] == "inf"
    assert generation["pipeline"]["checks"][0]["max_abs_diff"] == "-inf"
    assert generation["full_prefix"]["max_logit_diff"] == "inf"
    assert generation["full_prefix"]["compared"][0]["cached_diff"] == "nan"
    assert record["variants"][0]["text"]["perplexity"] == "inf"
    assert record["variants"][0]["text"]["perplexity_ratio"] == "nan"
    assert record["findings"][-1]["details"]["margin"] == "nan"
    assert record["detections"][0]["worst"]["torch"]["box"] == [0.0, "nan", 4.0, "inf"]
    assert record["detections"][0]["min_iou"] == "nan"

    again = run_from_json(json.loads(text))
    assert json.dumps(run_to_json(again), indent=2, allow_nan=False) == text
    read = again.models[0]
    assert read.generation is not None
    assert read.generation.first_token_difference is not None
    assert math.isnan(read.generation.max_logit_diff[2])
    assert math.isnan(read.generation.first_token_difference.margin)
    assert read.generation.thresholds[0].steps[0].max_logit_diff == INF
    assert read.generation.full_prefix is not None
    assert math.isnan(read.generation.full_prefix.lengths[0].cached_diff)
    assert read.variants[0].text is not None
    assert read.variants[0].text.nll == INF
    assert math.isnan(read.findings[-1].details["margin"])
    assert read.detections[0].max_box_diff == INF


def test_every_renderer_shows_the_nonfinite_figures() -> None:
    run = nonfinite_run()
    markdown = render_markdown(run)
    assert "| Max logit diff | 1e-07 | inf | nan |" in markdown
    assert "max logit diff inf at step 1" in "\n".join(generation_lines(run))
    assert run.models[0].name in verdict_table(run)
    json.dumps(render_sarif(run), allow_nan=False)
    assert "tokens differ" in render_junit(run)


def test_shards_with_nonfinite_figures_merge() -> None:
    run = nonfinite_run()
    plan = dataclasses.replace(run, configured_models=tuple(m.name for m in run.models))
    shards = [dataclasses.replace(plan, models=plan.models[k::2], shard=Shard(k + 1, 2))
              for k in range(2)]
    read = [(f"shard {k + 1}", run_from_json(json.loads(json.dumps(run_to_json(shard),
                                                                      allow_nan=False))))
            for k, shard in enumerate(shards)]
    merged = merge_runs(read)
    assert [m.name for m in merged.models] == list(plan.configured_models)
    generation = merged.models[0].generation
    assert generation is not None
    assert generation.max_logit_diff[1] == INF
    assert '"margin": "nan"' in json.dumps(run_to_json(merged), allow_nan=False)


def test_every_float_of_a_findings_details_is_read_back_as_a_figure() -> None:
    """A details key typed float and missing from DETAIL_FIGURES would read back as "nan"."""
    assert _float_keys(FindingDetails) - {"threshold"} <= DETAIL_FIGURES


def _float_keys(shape: object) -> set[str]:
    keys: set[str] = set()
    for key, hint in typing.get_type_hints(shape).items():
        for part in _parts(hint):
            if part is float:
                keys.add(key)
            elif typing.is_typeddict(part):
                keys |= _float_keys(part)
    return keys


def _parts(hint: object) -> list[object]:
    """A type's members: `float | None` -> [float, None]; list[X] -> X's; NotRequired[X] -> X."""
    args = typing.get_args(hint)
    if not args:
        return [hint]
    return [part for arg in args for part in _parts(arg)]


def test_a_threshold_step_judges_nan_and_inf_by_the_comparisons_rule() -> None:
    """Row 0: the same -inf on both sides (a masked token) passes with difference 0; row 1:
    onnxruntime NaN where PyTorch is finite fails with an infinite difference (a plain
    subtraction made both NaN, and NaN > atol is False: row 1 passed)."""
    import numpy as np

    from onnx_parity.verification.generation.thresholds import _compared

    expected = np.array([[1.0, -INF, 0.5], [1.0, 2.0, 0.5]], dtype=np.float32)
    actual = np.array([[1.0, -INF, 0.5], [1.0, 2.0, NAN]], dtype=np.float32)
    step = _compared(7, expected, actual, (1e-5, 1e-4))
    assert step.differing_rows == (1,)
    assert step.max_logit_diff == INF
    assert _compared(7, expected[:1], actual[:1], (1e-5, 1e-4)).max_logit_diff == 0.0


def test_the_full_prefix_comparison_judges_nan_and_inf_by_the_comparisons_rule() -> None:
    """As the threshold steps: the same -inf on both sides is no difference, onnxruntime's NaN
    where the full forward is finite fails."""
    import numpy as np

    from onnx_parity.verification.generation.full_prefix import _outside

    expected = np.array([[1.0, -INF, 0.5], [1.0, 2.0, 0.5]])
    actual = np.array([[1.0, -INF, 0.5], [1.0, 2.0, NAN]])
    outside, worst = _outside(actual, expected, (1e-5, 1e-4))
    assert outside.tolist() == [False, True]
    assert worst == INF
    assert _outside(actual[:1], expected[:1], (1e-5, 1e-4))[1] == 0.0
