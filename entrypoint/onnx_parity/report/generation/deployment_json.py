"""A generating model's bundles and runtime loop in report.json (`models[].generation.bundles`,
`.runtime`): written only when the model asked for them, so the cache hands back the bundles'
documents and publishing writes the folders again without a worker."""

from __future__ import annotations

from typing import Any, cast

from onnx_parity.generation_results import Bundle, RuntimeGeneration, TokenDifference
from onnx_parity.report.generation.generation_shapes import (
    BundleJson,
    GenerationJson,
    RuntimeGenerationJson,
    TokenDifferenceJson,
)
from onnx_parity.report.json_figures import figure_from_json, figure_to_json


def difference_to_json(first: TokenDifference | None) -> TokenDifferenceJson | None:
    return None if first is None else {
        "step": first.step, "row": first.row, "pytorch_token": first.pytorch_token,
        "onnx_token": first.onnx_token, "logit_diff": figure_to_json(first.logit_diff),
        "margin": figure_to_json(first.margin), "near_tie": first.near_tie}


def difference_from_json(first: TokenDifferenceJson | None) -> TokenDifference | None:
    return None if first is None else TokenDifference(
        step=first["step"], row=first["row"], pytorch_token=first["pytorch_token"],
        onnx_token=first["onnx_token"], logit_diff=figure_from_json(first["logit_diff"]),
        margin=figure_from_json(first["margin"]), near_tie=first["near_tie"])


def add_deployment(data: GenerationJson, bundles: tuple[Bundle, ...],
                   runtime: RuntimeGeneration | None) -> None:
    if bundles:
        data["bundles"] = [bundle_to_json(bundle) for bundle in bundles]
    if runtime is not None:
        data["runtime"] = {
            "runtime": runtime.runtime, "steps": runtime.steps,
            "tokens_agree": list(runtime.tokens_agree), "compared": list(runtime.compared),
            "first_token_difference": difference_to_json(runtime.first_token_difference)}


def bundle_to_json(bundle: Bundle) -> BundleJson:
    documents = cast(dict[str, dict[str, object]], bundle.documents)
    return {"runtime": bundle.runtime, "suffix": bundle.suffix, "documents": documents}


def bundles_from_json(data: GenerationJson) -> tuple[Bundle, ...]:
    return tuple(Bundle(item["runtime"], item["suffix"],
                        cast(dict[str, dict[str, Any]], item["documents"]))
                 for item in data.get("bundles", []))


def runtime_from_json(data: GenerationJson) -> RuntimeGeneration | None:
    item: RuntimeGenerationJson | None = data.get("runtime")
    if item is None:
        return None
    return RuntimeGeneration(item["runtime"], item["steps"], tuple(item["tokens_agree"]),
                             tuple(item["compared"]),
                             difference_from_json(item["first_token_difference"]))
