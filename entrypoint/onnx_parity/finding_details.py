"""What a finding's `details` may hold: every key a producer puts there, with its type.

`details` is the machine-readable half of a finding (report.json's `findings[].details`): the
report files a variant's findings under `variant`, localisation reads `output`, the comment
shows `source`. The producers are named beside each group. The dicts are plain dicts at run
time, written to JSON as they are, so these types describe report.json's shape as well.
findings.py owns this module (`Finding.details` is a `FindingDetails`); nothing here imports
findings.py, so a code held in details is typed `str` and checked where report.json is read
back (`findings.parse_code`).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class FirstDivergence(TypedDict):
    """The first diverging node of a localised mismatch (verification/localisation/localise.py)."""

    node: str
    op: str | None
    module: str | None
    file: str | None
    line: int | None
    source: str | None  # the user's line of code at file:line
    max_abs_diff: float | None
    max_rel_diff: float | None
    inputs_max_abs_diff: float | None
    nodes_compared: int
    nodes_skipped: int
    runtime_optimization: str
    batch_size: int
    library_frame: NotRequired[str]  # the innermost frame, an installed package's, past the line


class Reduction(TypedDict):
    """Where bisection over the graph's order found a failure start
    (verification/localisation/reduce.py)."""

    found_by: str  # "bisection" (against PyTorch) | "optimizer-bisection" (against "disabled")
    value: str  # the ONNX value whose prefix fails first
    op: str | None
    file: str | None
    line: int | None
    max_abs_diff: float | None
    level: str  # the optimization level each prefix ran at
    prefixes_run: int
    lines: list[str]  # the user's lines of the nodes the repro folder holds


class OtherExporter(TypedDict):
    """The exporter not configured, tried for an unsupported operator (export/review.py)."""

    exporter: str
    exports: bool


class VariantMiss(TypedDict):
    """A variant's figure below its threshold (variants/review.py)."""

    output: str
    batch_size: int
    figure: str  # "sqnr_db" | "top1_agreement" | "perplexity_ratio"
    value: float
    threshold: float


class TensorLossDetails(TypedDict):
    """One of the tensors a variant loses the most at (variants/review.py)."""

    tensor: str
    op: str | None
    file: str | None
    line: int | None
    sqnr_db: float


class FindingDetails(TypedDict, total=False):
    # the output and batch a finding is about (verification/outputs.py, optimizer.py)
    output: str
    batch_size: int
    batches: list[int]  # every batch size a finding merged from repeats is about
    sizes: list[int]  # every size of a declared axis it is about (verification/repeats.py)
    explained_by: str  # the code (findings.Code) of the finding that explains a failure
    # optimizer-drift (verification/optimizer.py)
    level: str
    max_abs_diff: float | None
    disabled_max_abs_diff: float
    highest_passing_level: str
    smallest_passing_atol: float | None
    # declared dynamic dimensions (verification/axis_runs.py, frozen.py)
    subject: str
    dimension: str
    axes: list[list[str | int]]
    passed_sizes: list[int]
    failed_size: int
    size: int
    reason: Literal["pytorch"]  # why a length was skipped: PyTorch itself cannot run it
    # what the export assumed of a dimension (verification/assumptions.py)
    condition: str  # "time must be a multiple of 8"
    guard: str  # the guard torch recorded, in the configured names
    violating_sizes: list[int]  # the lengths run that break it
    failed_sizes: list[int]  # those of them that failed: the failures it explains
    node: str  # a TorchScript node whose constant shape holds the export size
    constant: list[int]
    # the export (export/review.py, export/model_checks.py)
    operator: str
    exporter: str
    handled: bool
    other_exporter: OtherExporter
    attempts: list[str]
    python_value: bool  # a TracerWarning of a tensor turned into a Python value (a constant)
    requested: int
    actual: int | None
    # an operator onnxruntime's provider has no kernel for (verification/run_failures.py),
    # with `operator` and `node`: the dtype its inputs hold
    dtype: str
    # deployment variants (variants/review.py, verification/outputs.py)
    variant: str
    misses: list[VariantMiss]
    worst_tensors: list[TensorLossDetails]
    tensor: str
    op: str | None
    largest: float
    tensors: list[str]
    # a generating model's variant on `eval-tokens`; an int4 token's cause (variants/review.py)
    perplexity: float
    fp32_perplexity: float
    tokens: int
    top1_agreement: float
    accuracy_level: int
    level0_first_difference: int | None
    cause: str  # "weights" | "int8-activations" | "unknown" (level 0 could not decode)
    # generation (verification/generation/review.py): the first token that differs
    step: int
    row: int
    pytorch_token: int
    onnx_token: int
    logit_diff: float
    margin: float
    near_tie: bool
    # the runtime whose own loop generated (`runtime`, verification/generation/genai_runtime.py)
    runtime: str
    # a position threshold crossed (verification/generation/thresholds.py), with `max_abs_diff`
    config_key: str
    threshold: int
    past_length: int
    rows: list[int]
    # a detector's image that differs, and the near-ties counted (verification/detections/)
    image: int
    near_threshold: int
    # experts no compared token reached (verification/generation/expert_routing.py): per
    # layer's path, the experts' indices
    unrouted: dict[str, list[int]]
    # where it points (pipeline/all_models.py) and localisation
    # (verification/localisation/localise.py)
    source: str
    localisation: str
    first_divergence: FirstDivergence
    reduction: Reduction
