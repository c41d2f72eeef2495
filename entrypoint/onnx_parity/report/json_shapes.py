"""The JSON files' shapes, as typed dicts: report.json and the per-model records beside it.

serialization.py and records.py build and read exactly these; the keys of the ones written
from a dataclass follow its fields in order (tests/test_finding_codes.py holds them together).
A key a reader takes with `.get` may be missing from an older report.
"""

from __future__ import annotations

from typing import NotRequired, TypeAlias, TypedDict

from onnx_parity.findings import Code
from onnx_parity.report.detections_json import DetectionImageJson
from onnx_parity.report.generation.generation_shapes import (
    GenerationJson,
    RoutingChangeJson,
    TextScoreJson,
)
from onnx_parity.report.json_figures import Figure

Shapes: TypeAlias = dict[str, list[int]]  # input -> its shape
JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"


class FindingJson(TypedDict):
    code: Code
    message: str
    file: NotRequired[str]
    line: NotRequired[int]
    fix: str  # the finding's own fix, else its code's standard one
    evidence: NotRequired[str]
    allowed_by: NotRequired[str]
    severity: str  # a Severity's value
    # findings.FindingDetails, its infinite figures as text
    details: NotRequired[dict[str, JsonValue]]


class ComparisonJson(TypedDict):  # results.OutputComparison
    output: str
    batch_size: int
    torch_shape: list[int]
    onnx_shape: list[int]
    torch_dtype: str
    onnx_dtype: str
    max_abs_diff: Figure
    max_rel_diff: Figure
    mismatched: int
    total: int
    smallest_passing_atol: Figure
    passed: bool
    input_shapes: Shapes
    tolerance_share: Figure
    dimensions: dict[str, int]
    left_out: int  # elements not compared (compare-mask), where the input left_out_by is 0
    left_out_by: str | None


class AttemptJson(TypedDict):  # results.ExportAttempt
    exporter: str
    succeeded: bool
    seconds: float
    message: str | None


class StepJson(TypedDict):  # results.StepTiming
    step: str
    seconds: float


class StoredFileJson(TypedDict):  # results.StoredFile
    file: str
    size_bytes: int
    sha256: str


class VariantComparisonJson(TypedDict):  # results.VariantComparison
    output: str
    batch_size: int
    input_shapes: Shapes
    max_abs_diff: Figure
    sqnr_db: Figure
    cosine: Figure
    top1_agreement: Figure


class VariantFiguresJson(TypedDict):
    """What a variant was built into and how close it stays (report.json and its record)."""

    file: str | None  # <model>.<variant>.onnx in the output folder, when it was built
    sha256: str | None
    size_bytes: int | None
    fp32_size_bytes: int
    files: list[StoredFileJson]  # its .onnx, then its external data when it has any
    latency_ms: float | None
    fp32_latency_ms: float | None
    comparisons: list[VariantComparisonJson]
    notes: list[str]
    skipped: str | None
    settings: dict[str, JsonValue]
    text: NotRequired[TextScoreJson | None]  # a generating model's variant on `eval-tokens`
    routing: NotRequired[RoutingChangeJson]  # a mixture-of-experts decoder's variant


class VariantJson(VariantFiguresJson):
    name: str
    findings: list[FindingJson]


class NodeJson(TypedDict):  # results.NodeCheck
    node: str
    op: str | None
    module: str | None
    file: str | None
    line: int | None
    max_abs_diff: Figure
    max_rel_diff: Figure
    inside: bool
    first: bool
    library_frame: str | None


class DivergenceJson(TypedDict):  # results.Divergence
    exporter: str
    output: str
    batch_size: int
    input_shapes: Shapes
    optimization: str
    atol: float
    rtol: float
    nodes: list[NodeJson]
    nodes_skipped: int
    seconds: float
    unlocalised: str | None
    inputs_max_abs_diff: Figure


class ReproJson(TypedDict):  # results.Repro
    value: str
    op: str | None
    file: str | None
    line: int | None
    found_by: str  # "localisation" | "bisection" | "optimizer-bisection" | "generation-step"
    # | "file-call"
    reference: str  # "pytorch" | "optimizations-disabled"
    optimization: str
    batch_size: int
    samples: int
    inputs: list[str]
    outputs: list[str]
    nodes: int
    atol: float
    rtol: float
    max_abs_diff: Figure
    reproduces: bool
    size_bytes: int
    limit_bytes: int
    lines: list[str]
    platform: str
    omitted: str | None  # why the subgraph or its inputs are not included
    folder: str | None  # <name>.repro, in the output folder
    step: NotRequired[StepReproJson | None]  # a generating model's failing step (absent: older)


class StepReproJson(TypedDict):  # generation_results.StepRepro
    step: int
    past_length: int
    model: str  # the decoder file, <name>.onnx beside the folder
    optimization: str
    batch_size: int
    rows: list[int]
    inputs: list[str]  # step_inputs.npz's keys
    outputs: list[str]  # step_expected.npz's PyTorch outputs (beside `compared`)
    max_abs_diff: Figure
    reproduces: bool
    size_bytes: int
    omitted: str | None  # why step_inputs.npz and step_expected.npz are not included


class ProvenanceJson(TypedDict):  # results.Provenance
    created: str
    commit: str | None
    run_id: str | None


class BaseFiguresJson(TypedDict):  # results.BaseFigures
    passed: bool
    max_abs_diff: Figure
    error_codes: list[Code]


class BaselineJson(TypedDict):  # results.Baseline
    tool_version: str
    config_path: str
    removed_models: list[str]
    notes: list[str]


class LengthsJson(TypedDict):
    """The lengths one declared dimension ran at, and each length skipped (as text) -> why."""

    run: list[int]
    skipped: dict[str, str]
    far_side: NotRequired[list[int]]  # the lengths added to break an assumption (absent: none)


class ModelJson(TypedDict):
    """One model of report.json, also what the cache keeps of a result."""

    name: str
    passed: bool
    exporter: str | None
    opset: int | None
    requested_opset: int
    atol: float
    rtol: float
    batch_sizes: list[int]
    max_abs_diff: Figure
    max_rel_diff: Figure
    findings: list[FindingJson]
    comparisons: list[ComparisonJson]
    attempts: list[AttemptJson]
    steps: list[StepJson]
    onnx_sha256: str | None
    onnx_files: list[StoredFileJson]  # the .onnx, then its external data when it has any
    sample_sha256: dict[str, str]
    runtime_optimization: str
    forward_kwargs: dict[str, bool | int | float | str]  # `forward-kwargs` as forward got them
    axis_sizes: dict[str, dict[str, list[int]]]  # input -> axis (as text) -> the sizes run
    dimension_sizes: dict[str, list[int]]
    # dimension -> the axes derived from it, "attention_mask axis 1 = past + 1" (absent: older)
    linked_axes: NotRequired[dict[str, list[str]]]
    lengths: dict[str, LengthsJson]  # dimension -> the lengths run and skipped
    tolerance_share: Figure
    variants: list[VariantJson]
    cached: bool
    cached_from: ProvenanceJson | None
    baseline: BaseFiguresJson | None
    divergence: DivergenceJson | None
    repro: NotRequired[ReproJson | None]  # the repro folder (absent in older reports)
    max_rss_bytes: int | None  # the worker's peak resident memory (None: not measured)
    seconds: NotRequired[Figure]  # the worker's wall time, when it was measured
    generation: NotRequired[GenerationJson]  # a generating model's decoding (`generate`)
    detections: NotRequired[list[DetectionImageJson]]  # a detector's images, each run matched


class RunJson(TypedDict):
    """report.json."""

    schema: int
    tool: str
    tool_version: str
    versions: dict[str, str]
    config: str
    passed: bool
    failed_models: list[str]
    models: list[ModelJson]
    shard: str | None  # "K/N"
    shard_plan: str | None
    configured_models: list[str]
    configuration_sha256: str | None
    baseline: BaselineJson | None
    env: NotRequired[list[str]]  # the names `env` set (absent in older reports)


class Accepted(TypedDict):
    atol: float
    rtol: float
    rule: str


class ParityRecord(TypedDict):
    """<name>.parity.json: what a later reader needs to trust the exported model file."""

    model: str
    passed: bool
    tool_version: str
    versions: dict[str, str]
    exporter: str | None
    opset: int | None
    accepted: Accepted
    max_abs_diff_by_batch_size: dict[str, Figure]
    comparisons: list[ComparisonJson]
    onnx_file: str | None
    onnx_sha256: str | None
    onnx_files: list[StoredFileJson]  # the .onnx, then its external data when it has any
    sample_sha256: dict[str, str]
    findings: list[FindingJson]
    runtime_optimization: str
    forward_kwargs: dict[str, bool | int | float | str]  # `forward-kwargs` as forward got them
    axis_sizes: dict[str, dict[str, list[int]]]


class DivergenceRecord(TypedDict):
    """<name>.divergence.json: every intermediate value compared, in graph order."""

    model: str
    tool_version: str
    exporter: str
    output: str
    batch_size: int
    input_shapes: Shapes
    runtime_optimization: str
    accepted: Accepted
    first_divergence: str | None  # the first diverging node's name
    unlocalised: str | None
    nodes_compared: int
    nodes_skipped: int
    seconds: float
    nodes: list[NodeJson]


class MadeFrom(TypedDict):
    onnx_file: str
    onnx_sha256: str | None
    onnx_files: list[StoredFileJson]


class VariantRecord(VariantFiguresJson):
    """<name>.<variant>.parity.json: what the variant was made from, how, and its figures."""

    model: str
    variant: str
    passed: bool
    tool_version: str
    versions: dict[str, str]
    made_from: MadeFrom
    findings: list[FindingJson]
