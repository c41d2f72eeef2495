"""A generating model's record in report.json (`models[].generation`), written only for a model
checked with `generate` (older reports and other models have none); and a generating model's
variant scored on `eval-tokens` (`models[].variants[].text`)."""

from __future__ import annotations

from onnx_parity.generation_results import (
    ExpertLayer,
    ExpertsCheck,
    GenerationResult,
    RoutingChange,
    TextScore,
)
from onnx_parity.report.generation.deployment_json import (
    add_deployment,
    bundles_from_json,
    difference_from_json,
    difference_to_json,
    runtime_from_json,
)
from onnx_parity.report.generation.full_prefix_json import (
    full_prefix_from_json,
    full_prefix_to_json,
)
from onnx_parity.report.generation.generation_shapes import (
    GenerationJson,
    RoutingChangeJson,
    TextScoreJson,
)
from onnx_parity.report.generation.pipeline_json import pipeline_from_json, pipeline_to_json
from onnx_parity.report.generation.threshold_json import thresholds_from_json, thresholds_to_json
from onnx_parity.report.json_figures import figure_from_json, figure_to_json


def generation_to_json(g: GenerationResult) -> GenerationJson:
    data: GenerationJson = {
        "steps": g.steps, "rows": g.rows, "tokens_agree": list(g.tokens_agree),
        "first_token_difference": difference_to_json(g.first_token_difference),
        "max_logit_diff": [figure_to_json(d) for d in g.max_logit_diff],
        "teacher_forced_from": g.teacher_forced_from,
        "thresholds": thresholds_to_json(g.thresholds)}
    add_deployment(data, g.bundles, g.runtime)
    if g.pipeline is not None:
        data["pipeline"] = pipeline_to_json(g.pipeline)
    if g.full_prefix is not None:
        data["full_prefix"] = full_prefix_to_json(g.full_prefix)
    if g.whole_prefix:
        data["whole_prefix"] = True
        data["whole_prefix_reason"] = g.whole_prefix_reason
    if g.experts is not None:
        e = g.experts
        data["experts"] = {"pytorch": list(e.pytorch), "exported": list(e.exported),
                           "routed": e.routed, "total": e.total}
        data["routing"] = [{"layer": layer.layer, "experts": len(layer.tokens),
                            "tokens": list(layer.tokens)} for layer in e.routing]
    return data


def generation_from_json(data: GenerationJson | None) -> GenerationResult | None:
    if not data:
        return None
    return GenerationResult(
        steps=data["steps"], rows=data["rows"], tokens_agree=tuple(data["tokens_agree"]),
        first_token_difference=difference_from_json(data["first_token_difference"]),
        max_logit_diff=tuple(figure_from_json(d) for d in data["max_logit_diff"]),
        teacher_forced_from=data["teacher_forced_from"], bundles=bundles_from_json(data),
        runtime=runtime_from_json(data),
        thresholds=thresholds_from_json(data.get("thresholds", [])),
        pipeline=pipeline_from_json(data.get("pipeline")),
        full_prefix=full_prefix_from_json(data.get("full_prefix")),
        experts=_experts_from_json(data), whole_prefix=data.get("whole_prefix", False),
        whole_prefix_reason=data.get("whole_prefix_reason", ""))


def _experts_from_json(data: GenerationJson) -> ExpertsCheck | None:
    experts = data.get("experts")
    if experts is None:
        return None
    routing = tuple(ExpertLayer(layer["layer"], tuple(layer["tokens"]))
                    for layer in data.get("routing", []))
    return ExpertsCheck(tuple(experts["pytorch"]), tuple(experts["exported"]), routing)


def routing_to_json(change: RoutingChange) -> RoutingChangeJson:
    return {"changed": change.changed, "choices": change.choices, "routers": change.routers,
            "share": change.share}


def routing_from_json(data: RoutingChangeJson | None) -> RoutingChange | None:
    return None if data is None else RoutingChange(data["changed"], data["choices"],
                                                   data["routers"])


def text_to_json(score: TextScore | None) -> TextScoreJson | None:
    if score is None:
        return None
    return {"file": score.file, "rows": score.rows, "tokens": score.tokens,
            "fp32_nll": figure_to_json(score.fp32_nll),
            "fp32_perplexity": figure_to_json(score.fp32_perplexity),
            "nll": figure_to_json(score.nll), "perplexity": figure_to_json(score.perplexity),
            "perplexity_ratio": figure_to_json(score.ratio),
            "top1_agreement": figure_to_json(score.top1_agreement)}


def text_from_json(data: TextScoreJson | None) -> TextScore | None:
    if not data:
        return None
    return TextScore(file=data["file"], rows=data["rows"], tokens=data["tokens"],
                     fp32_nll=figure_from_json(data["fp32_nll"]),
                     nll=figure_from_json(data["nll"]),
                     top1_agreement=figure_from_json(data["top1_agreement"]))
