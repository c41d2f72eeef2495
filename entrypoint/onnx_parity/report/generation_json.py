"""A generating model's record in report.json (`models[].generation`), written only for a model
checked with `generate` (older reports and other models have none); and a generating model's
variant scored on `eval-tokens` (`models[].variants[].text`)."""

from __future__ import annotations

from onnx_parity.generation_results import GenerationResult, TextScore, TokenDifference
from onnx_parity.report.json_shapes import GenerationJson, TextScoreJson, TokenDifferenceJson


def generation_to_json(g: GenerationResult) -> GenerationJson:
    first = g.first_token_difference
    difference: TokenDifferenceJson | None = None if first is None else {
        "step": first.step, "row": first.row, "pytorch_token": first.pytorch_token,
        "onnx_token": first.onnx_token, "logit_diff": first.logit_diff,
        "margin": first.margin, "near_tie": first.near_tie}
    return {"steps": g.steps, "rows": g.rows, "tokens_agree": list(g.tokens_agree),
            "first_token_difference": difference, "max_logit_diff": list(g.max_logit_diff),
            "teacher_forced_from": g.teacher_forced_from}


def generation_from_json(data: GenerationJson | None) -> GenerationResult | None:
    if not data:
        return None
    first = data["first_token_difference"]
    return GenerationResult(
        steps=data["steps"], rows=data["rows"], tokens_agree=tuple(data["tokens_agree"]),
        first_token_difference=None if first is None else TokenDifference(
            step=first["step"], row=first["row"], pytorch_token=first["pytorch_token"],
            onnx_token=first["onnx_token"], logit_diff=first["logit_diff"],
            margin=first["margin"], near_tie=first["near_tie"]),
        max_logit_diff=tuple(data["max_logit_diff"]),
        teacher_forced_from=data["teacher_forced_from"])


def text_to_json(score: TextScore | None) -> TextScoreJson | None:
    if score is None:
        return None
    return {"file": score.file, "rows": score.rows, "tokens": score.tokens,
            "fp32_nll": score.fp32_nll, "fp32_perplexity": score.fp32_perplexity,
            "nll": score.nll, "perplexity": score.perplexity, "perplexity_ratio": score.ratio,
            "top1_agreement": score.top1_agreement}


def text_from_json(data: TextScoreJson | None) -> TextScore | None:
    if not data:
        return None
    return TextScore(file=data["file"], rows=data["rows"], tokens=data["tokens"],
                     fp32_nll=data["fp32_nll"], nll=data["nll"],
                     top1_agreement=data["top1_agreement"])
