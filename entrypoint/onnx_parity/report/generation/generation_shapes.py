"""A generating model's record in report.json (`models[].generation`), as typed dicts: the
shapes json_shapes.py's ModelJson holds, kept apart as that module's generation family."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from onnx_parity.report.generation.full_prefix_json import FullPrefixJson
from onnx_parity.report.generation.pipeline_json import PipelineJson
from onnx_parity.report.generation.threshold_json import ThresholdJson


class TokenDifferenceJson(TypedDict):  # generation_results.TokenDifference
    step: int
    row: int
    pytorch_token: int
    onnx_token: int
    logit_diff: float | str  # a figure that is not finite as its text (json_figures.py)
    margin: float | str  # NaN where PyTorch's top two logits are the same infinity
    near_tie: bool


class GenerationJson(TypedDict):  # generation_results.GenerationResult
    steps: int
    rows: int
    tokens_agree: list[int]  # per row: steps whose tokens agreed before the first difference
    first_token_difference: TokenDifferenceJson | None
    max_logit_diff: list[float | str]  # per step, padded positions left out; "inf" when
    # a side is NaN or infinite where the other is not
    teacher_forced_from: int | None
    bundles: NotRequired[list[BundleJson]]  # `bundle`: written only when there are some
    runtime: NotRequired[RuntimeGenerationJson]  # `runtime`: written only when it ran
    thresholds: NotRequired[list[ThresholdJson]]  # position thresholds (absent: older reports)
    pipeline: NotRequired[PipelineJson]  # a vision-language model's three files
    # the file's cached loop against the model's full forward (absent: not compared)
    full_prefix: NotRequired[FullPrefixJson]
    experts: NotRequired[ExpertsJson]  # a mixture-of-experts decoder's implementations
    routing: NotRequired[list[ExpertLayerJson]]  # and PyTorch's routing, per layer
    whole_prefix: NotRequired[bool]  # true: no cache a file can carry, every step re-ran the prefix
    whole_prefix_reason: NotRequired[str]  # why: "forward takes no cache", or what its cache holds


class ExpertsJson(TypedDict):  # generation_results.ExpertsCheck, its routing apart
    pytorch: list[str]  # the implementation(s) PyTorch ran: the user's
    exported: list[str]  # what the file was exported with ([]: an export-command's file)
    routed: int  # experts that received a compared token, over every layer
    total: int


class ExpertLayerJson(TypedDict):  # generation_results.ExpertLayer
    layer: str
    experts: int
    tokens: list[int]  # per expert


class BundleJson(TypedDict):  # generation_results.Bundle
    runtime: str
    suffix: str
    documents: dict[str, dict[str, object]]  # file name -> its JSON document


class RuntimeGenerationJson(TypedDict):  # generation_results.RuntimeGeneration
    runtime: str
    steps: int
    tokens_agree: list[int]
    compared: list[int]
    first_token_difference: TokenDifferenceJson | None


class RoutingChangeJson(TypedDict):  # generation_results.RoutingChange
    changed: int  # (token, router) choices whose top-k set of experts differs from fp32's
    choices: int
    routers: int
    share: float


class TextScoreJson(TypedDict):  # generation_results.TextScore, with its derived figures
    file: str
    rows: int
    tokens: int  # the positions scored
    fp32_nll: float | str  # nats per token; "inf" or "nan" as text (json_figures.py)
    fp32_perplexity: float | str
    nll: float | str
    perplexity: float | str
    perplexity_ratio: float | str  # the variant's over fp32's
    top1_agreement: float | str
