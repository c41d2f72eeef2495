"""What a run found: plain values that carry their evidence, rendered later by report/."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from onnx_parity.detection_results import DetectionImage
from onnx_parity.findings import Finding, Severity
from onnx_parity.generation_results import GenerationResult, RoutingChange, StepRepro, TextScore


@dataclass(frozen=True)
class OutputComparison:
    """PyTorch against onnxruntime for one output at one batch size."""

    output: str
    batch_size: int
    torch_shape: tuple[int, ...]
    onnx_shape: tuple[int, ...]
    torch_dtype: str
    onnx_dtype: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    mismatched: int
    total: int
    # The smallest atol that passes at the configured rtol (None: none can: NaN, shapes differ)
    smallest_passing_atol: float | None
    passed: bool
    # The shape of each input this comparison ran on.
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # The worst element's share of its tolerance, max |onnx - torch| / (atol + rtol * |torch|):
    # below 1 passes (None: shapes differ or no element could be compared).
    tolerance_share: float | None = None
    # Each declared dynamic dimension other than the batch, at the size this comparison ran.
    dimensions: dict[str, int] = field(default_factory=dict)
    # Elements not compared where the input `left_out_by` is 0 (`total`, `mismatched`: those left)
    left_out: int = 0
    left_out_by: str | None = None

    @property
    def mismatched_percent(self) -> float:
        return 100.0 * self.mismatched / self.total if self.total else 0.0


@dataclass(frozen=True)
class ExportAttempt:
    exporter: str
    succeeded: bool
    seconds: float
    message: str | None = None


@dataclass(frozen=True)
class StepTiming:
    step: str
    seconds: float


@dataclass(frozen=True)
class DimensionLengths:
    """The lengths one declared dimension ran at (the committed one first), and each length
    skipped with why (PyTorch itself cannot run the model at it)."""

    run: tuple[int, ...]
    skipped: dict[int, str] = field(default_factory=dict)
    # the lengths added because they break what the export assumed (run or skipped)
    far_side: tuple[int, ...] = ()


@dataclass(frozen=True)
class StoredFile:
    """One file of an exported model as the output folder holds it (`<name>.onnx`, and
    `<name>.onnx.data` for a model with external data): its name, size and sha256."""

    file: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class VariantComparison:
    """A deployment variant against PyTorch's fp32 output, for one output at one batch."""

    output: str
    batch_size: int
    input_shapes: dict[str, tuple[int, ...]]
    max_abs_diff: float | None
    # 20 * log10(|ref| / |ref - out|); inf when the two are identical. None: not comparable.
    sqnr_db: float | None
    cosine: float | None
    # Share of rows whose argmax over the last axis agrees (None: the output holds no scores).
    top1_agreement: float | None


@dataclass(frozen=True)
class VariantResult:
    """One deployment variant of a model: what it was built into and how close it stays."""

    name: str  # "int8-dynamic" | "int8-static" | "fp16"
    fp32_size_bytes: int
    size_bytes: int | None = None  # None: it could not be built
    sha256: str | None = None
    comparisons: tuple[VariantComparison, ...] = ()
    latency_ms: float | None = None  # onnxruntime median at the first batch size (report only)
    fp32_latency_ms: float | None = None
    notes: tuple[str, ...] = ()
    skipped: str | None = None  # why it was not built (the fp32 model did not pass)
    # How it was made and judged: calibration (int8-static), min-sqnr-db, min-top1-agreement.
    settings: dict[str, object] = field(default_factory=dict)
    # Path in the engine's work folder; publishing moves it to --out as <model>.<name>.onnx.
    onnx_path: str | None = None
    files: tuple[StoredFile, ...] = ()  # its .onnx, then its external data; () before built
    text: TextScore | None = None  # a generating model's variant scored on `eval-tokens`
    routing: RoutingChange | None = None  # a mixture-of-experts decoder's router choices

    @property
    def worst_sqnr_db(self) -> float | None:
        return _extreme((c.sqnr_db for c in self.comparisons), min)

    @property
    def worst_top1_agreement(self) -> float | None:
        return _extreme((c.top1_agreement for c in self.comparisons), min)

    @property
    def max_abs_diff(self) -> float | None:
        return _extreme((c.max_abs_diff for c in self.comparisons), max)


@dataclass(frozen=True)
class NodeCheck:
    """One intermediate value of the exported graph against PyTorch's, in graph order."""

    node: str  # the ONNX value name
    op: str | None  # the aten op (dynamo) or the ONNX op type (TorchScript)
    module: str | None  # the module path, e.g. encoder.layer.3.attn
    file: str | None  # the user's file and line the value comes from
    line: int | None
    max_abs_diff: float | None
    max_rel_diff: float | None
    inside: bool  # every element within atol + rtol * |torch|
    first: bool = False  # the first value outside tolerance whose inputs are all inside
    # The innermost frame when it is not the user's line (`torch/nn/modules/conv.py:385`, a
    # TorchScript module's torch `forward`); file/line are then the user's line that leads to it.
    library_frame: str | None = None


@dataclass(frozen=True)
class Divergence:
    """Where a failing model's numbers start to differ: every compared value, the first named."""

    exporter: str
    output: str  # the output and batch the comparison ran on (the first that failed)
    batch_size: int
    input_shapes: dict[str, tuple[int, ...]]
    optimization: str  # onnxruntime's graph optimization level of the comparison
    atol: float
    rtol: float
    nodes: tuple[NodeCheck, ...]
    nodes_skipped: int  # values of the graph with no counterpart (folded, renamed, fused)
    seconds: float
    # Why no first node was named (None when one was), e.g. TorchScript without module scopes.
    unlocalised: str | None = None
    # How much the first diverging node's compared inputs differ at most (0: exact inputs).
    inputs_max_abs_diff: float | None = None

    @property
    def first(self) -> NodeCheck | None:
        return next((node for node in self.nodes if node.first), None)


@dataclass(frozen=True)
class Repro:
    """A failing model's `<name>.repro/` folder: the part of the exported graph that shows the
    divergence (`subgraph.onnx`), its inputs as the full model computed them (`inputs.npz`),
    the reference values of its outputs (`expected.npz`), and what it reproduces."""

    value: str  # the ONNX value it reproduces
    op: str | None  # its aten op (dynamo) or ONNX op type
    file: str | None  # the user's file and line the value comes from
    line: int | None
    # How found: "localisation" (every value compared), "bisection" (prefixes against PyTorch),
    # "optimizer-bisection" (against themselves, optimizations off); no node named:
    # "generation-step" (`step`: the failing step), "file-call" (a VLM's other file, whole).
    found_by: str
    reference: str  # what expected.npz holds: "pytorch", or "optimizations-disabled"
    optimization: str  # onnxruntime's graph optimization level repro.py runs at
    batch_size: int  # the failing batch
    samples: int  # the samples inputs.npz holds: the batch, or 1 when cut to fit
    inputs: tuple[str, ...]  # the subgraph's inputs, in order (inputs.npz's arr_0, arr_1, ...)
    outputs: tuple[str, ...]
    nodes: int  # nodes in subgraph.onnx
    atol: float
    rtol: float
    # What repro.py prints, measured on the subgraph itself in the worker (None: not run).
    max_abs_diff: float | None
    reproduces: bool  # outside the tolerance: repro.py exits 1
    size_bytes: int  # the folder's files together
    limit_bytes: int  # repro-max-mb
    lines: tuple[str, ...] = ()  # the user's lines the subgraph's nodes come from (file:line)
    platform: str = ""  # where it was measured (platform.platform())
    # Why the subgraph or its inputs are not in the folder (None: they are).
    omitted: str | None = None
    # The folder in the engine's work folder; publishing moves it to --out as <name>.repro.
    folder: str | None = None
    step: StepRepro | None = None  # a generating model's failing step (its whole feed)


@dataclass(frozen=True)
class Provenance:
    """The run that measured a result the cache handed back (report.json `cached_from`)."""

    created: str  # UTC, ISO 8601, to the second
    commit: str | None = None  # GITHUB_SHA of that run, when it ran in Actions
    run_id: str | None = None  # GITHUB_RUN_ID of that run


@dataclass(frozen=True)
class BaseFigures:
    """The same model in the baseline report (the base branch's report.json)."""

    passed: bool
    max_abs_diff: float | None
    error_codes: tuple[str, ...]  # the codes of its error findings, once each


@dataclass(frozen=True)
class ModelResult:
    name: str
    exporter: str | None
    requested_opset: int
    opset: int | None
    atol: float
    rtol: float
    batch_sizes: tuple[int, ...]
    findings: tuple[Finding, ...]
    comparisons: tuple[OutputComparison, ...] = ()
    attempts: tuple[ExportAttempt, ...] = ()
    steps: tuple[StepTiming, ...] = ()
    # Path of the exported model in the engine's work folder; publishing moves it to --out.
    onnx_path: str | None = None
    onnx_sha256: str | None = None
    # The exported model's files: its .onnx, then its external data when it has any.
    onnx_files: tuple[StoredFile, ...] = ()
    sample_sha256: dict[str, str] = field(default_factory=dict)
    log: str = ""
    runtime_optimization: str = "all"  # onnxruntime's graph optimization level of the check
    # `forward-kwargs`: the constants forward was called with (in PyTorch and in the export)
    forward_kwargs: dict[str, bool | int | float | str] = field(default_factory=dict)
    # input -> axis -> the sizes that ran, for each declared dynamic axis other than the batch
    axis_sizes: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    # the same by dimension name (axes that share a name are one dimension)
    dimension_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # dimension name -> the axes whose length follows it: `attention_mask axis 1 = past + 1`
    linked_axes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # dimension name -> the lengths run and those skipped, with why
    lengths: dict[str, DimensionLengths] = field(default_factory=dict)
    divergence: Divergence | None = None
    # The repro folder of a failing model whose divergence was found (None: none).
    repro: Repro | None = None
    variants: tuple[VariantResult, ...] = ()
    # Wall time of the model's check in its worker (None: not measured, e.g. an older report).
    seconds: float | None = None
    # The worker's peak resident memory (max RSS, bytes; None: not measured).
    max_rss_bytes: int | None = None
    # Repository files the worker opened or imported -> sha256 (the cache's fingerprint).
    files_read: dict[str, str] = field(default_factory=dict)
    cached_from: Provenance | None = None  # set when the cache handed the result back
    base: BaseFigures | None = None  # the model in the baseline report (None: none there)
    generation: GenerationResult | None = None  # a generating model's decoding (`generate`)
    detections: tuple[DetectionImage, ...] = ()  # a detector's images matched (detections)

    @property
    def passed(self) -> bool:
        return all(finding.severity != Severity.ERROR for finding in self.findings)

    @property
    def cached(self) -> bool:
        return self.cached_from is not None

    @property
    def max_abs_diff(self) -> float | None:
        return _extreme((c.max_abs_diff for c in self.comparisons), max)

    @property
    def max_rel_diff(self) -> float | None:
        return _extreme((c.max_rel_diff for c in self.comparisons), max)

    @property
    def tolerance_share(self) -> float | None:
        return _extreme((c.tolerance_share for c in self.comparisons), max)

    def diffs_by_batch(self) -> dict[int, float | None]:
        return {
            size: _extreme((c.max_abs_diff for c in self.comparisons if c.batch_size == size), max)
            for size in self.batch_sizes
        }


@dataclass(frozen=True)
class Shard:
    """`--shard K/N`: the K-th of N deterministic parts of the configured models (1-based)."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Baseline:
    """The report this run was compared with (`--baseline`), as far as the comment shows it."""

    tool_version: str
    config_path: str
    removed_models: tuple[str, ...]  # configured there, not here
    notes: tuple[str, ...] = ()  # e.g. another configuration or tool version


@dataclass(frozen=True)
class RunResult:
    config_path: str
    versions: dict[str, str]
    models: tuple[ModelResult, ...]
    shard: Shard | None = None
    # Every configured model, in configuration order (a shard checks only some of them).
    configured_models: tuple[str, ...] = ()
    # sha256 of the resolved configuration: shards of one run must agree on it.
    configuration_sha256: str | None = None
    baseline: Baseline | None = None
    # How a shard's models were chosen (sha256 of the durations it balanced by; "" by name).
    shard_plan: str | None = None
    # The variables the configuration's `env` set for the model's code: names, never values.
    env: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(model.passed for model in self.models)

    @property
    def failed_models(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.models if not model.passed)


def _extreme(values: Iterable[float | None], pick: Callable[[list[float]], float]) -> float | None:
    """`max` or `min` of the known values; None when none is known."""
    present = [value for value in values if value is not None]
    return pick(present) if present else None
