"""What the check of a generating model (`generate`) found, which results.py's ModelResult
holds: greedy decoding in PyTorch and onnxruntime compared step by step (results.py owns this
module; it imports nothing of the package)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenDifference:
    """The first greedy token onnxruntime picks differently: its step, batch row (the lowest
    at that step), both tokens, |logit diff| there and PyTorch's top-2 margin."""

    step: int
    row: int
    pytorch_token: int
    onnx_token: int
    logit_diff: float
    margin: float
    near_tie: bool  # the margin is below the tolerance: numeric noise decided (a warning)


@dataclass(frozen=True)
class ThresholdStep:
    """One decoding step across a position threshold: its past length (the step has one more
    position), both sides' logits compared and their greedy tokens."""

    past: int
    max_logit_diff: float
    tokens_agree: int  # rows whose greedy token agreed
    rows: int
    differing_rows: tuple[int, ...]  # rows whose logits are outside the tolerance or token differs


@dataclass(frozen=True)
class ThresholdRun:
    """A position threshold of the model's config (models/generating/thresholds.py) and the
    decoding steps run across it: total lengths T - 1, T and T + 1 (past lengths T - 2, T - 1,
    T)."""

    key: str  # the config key
    value: int
    layers: tuple[int, ...]  # the layers it applies to; () = every layer
    steps: tuple[ThresholdStep, ...]  # () when not run (`skipped` says why)
    built: str = ""  # how the past was built
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        return all(not step.differing_rows for step in self.steps)


@dataclass(frozen=True)
class PrefixLength:
    """The file's presents-fed logits at one total length (the last position) against the
    model's own full forward over the same whole prefix, no cache (what transformers'
    `generate` computes where it recomputes its cache), and against its forward with cache."""

    total: int  # positions fed, the prefix and the step's token
    threshold: int | None  # the threshold whose steps it is (None: the generation's last step)
    max_logit_diff: float  # the file against the full forward
    cached_diff: float  # the file against the forward with cache (the loop both sides run)
    tokens_agree: int  # rows whose greedy token is the full forward's
    rows: int
    differing_rows: tuple[int, ...]  # prompt rows outside the tolerance or picking another token
    # The first row picking another token: (prompt row, the file's token, the full forward's).
    first_token: tuple[int, int, int] | None = None
    recomputes: bool = False  # the model's own generation drops its cache crossing `threshold`
    cached_within: bool = True  # the file within the tolerance of the forward with cache


@dataclass(frozen=True)
class FullPrefix:
    """Every length the file's cached loop was compared at with the model's full forward."""

    lengths: tuple[PrefixLength, ...]
    built: str = ""  # how a threshold's prefix of tokens was made

    @property
    def max_logit_diff(self) -> float:
        return max((length.max_logit_diff for length in self.lengths), default=0.0)


@dataclass(frozen=True)
class FileCheck:
    """One file of a vision-language pipeline against PyTorch on one case: the vision file at
    one image resolution, the embedding file on one prompt case."""

    file: str  # "vision", "embedding"
    case: str  # vision: the grid, e.g. "1x4x6" (t x h x w); embedding: "one image", ...
    shape: tuple[int, ...]  # the output's shape (image_features, inputs_embeds)
    max_abs_diff: float | None  # None: the file did not run (or the shapes differ)
    passed: bool
    seen: bool = True  # vision: a resolution the samples hold (False: the unseen one)


@dataclass(frozen=True)
class PipelineChecks:
    """A vision-language model checked as the pipeline it ships as (models/vision_language/):
    its family, its three files, each file's comparisons, and the inputs the tool derived."""

    family: str  # "qwen2-vl"
    files: tuple[str, ...]  # <name>.vision.onnx, <name>.embedding.onnx, <name>.onnx
    checks: tuple[FileCheck, ...]
    derived: tuple[str, ...] = ()  # "mm_token_type_ids: derived from ..."
    positions: str = ""  # how the decoder's position_ids were computed

    def of(self, file: str) -> tuple[FileCheck, ...]:
        return tuple(check for check in self.checks if check.file == file)

    @property
    def resolutions(self) -> int:
        """The image resolutions the vision file ran at."""
        return len(self.of("vision"))


@dataclass(frozen=True)
class ExpertLayer:
    """One mixture-of-experts layer's router choices in PyTorch over every compared step: the
    tokens each expert received (a token counts once for each of its top-k experts; padded
    positions and rows stopped at the end-of-sequence token left out)."""

    layer: str  # the experts module's path: "model.layers.0.mlp.experts"
    tokens: tuple[int, ...]  # per expert, in the router's order

    @property
    def routed(self) -> int:
        """The experts that received a token (and so were compared)."""
        return sum(1 for count in self.tokens if count)


@dataclass(frozen=True)
class ExpertsCheck:
    """A mixture-of-experts decoder: the experts implementation PyTorch ran (the user's, as
    built) beside the one its file was exported with, and PyTorch's routing."""

    pytorch: tuple[str, ...]  # "grouped_mm": the user's
    # "batched_mm": what the export traced (models/generating/moe.py); () for the file of an
    # `export-command`
    exported: tuple[str, ...]
    routing: tuple[ExpertLayer, ...]

    @property
    def routed(self) -> int:
        return sum(layer.routed for layer in self.routing)

    @property
    def total(self) -> int:
        return sum(len(layer.tokens) for layer in self.routing)


@dataclass(frozen=True)
class GenerationResult:
    """Greedy decoding of every committed prompt, PyTorch's and onnxruntime's side by side."""

    steps: int  # forward passes: the prompt's (step 0), then one new token each
    rows: int  # the prompts
    tokens_agree: tuple[int, ...]  # per row: steps whose tokens agreed before the first miss
    first_token_difference: TokenDifference | None
    max_logit_diff: tuple[float, ...]  # per step, padded positions left out
    teacher_forced_from: int | None  # the step after the first difference, when one ran
    bundles: tuple[Bundle, ...] = ()  # `bundle`: the folders written beside the decoder
    runtime: RuntimeGeneration | None = None  # `runtime`: the prompts in that runtime's loop
    thresholds: tuple[ThresholdRun, ...] = ()  # position thresholds crossed (or not, and why)
    pipeline: PipelineChecks | None = None  # a vision-language model's three files
    full_prefix: FullPrefix | None = None  # the cached loop against the model's full forward
    experts: ExpertsCheck | None = None  # a mixture-of-experts decoder's
    whole_prefix: bool = False  # no cache a file can carry: every step re-ran the whole prefix
    whole_prefix_reason: str = ""  # why: "forward takes no cache", or what its cache holds

    @property
    def agreed(self) -> int:
        """Steps every row agreed on (the figure of the report's row)."""
        return min(self.tokens_agree, default=self.steps)


@dataclass(frozen=True)
class StepRepro:
    """A generating model's failing step in its `<name>.repro/` folder (results.Repro.step):
    the decoder file's whole feed at that step (`step_inputs.npz`, by the file's input names,
    as onnxruntime was fed them: the past is its own presents of the step before) and
    PyTorch's outputs there (`step_expected.npz`, with `compared`, the positions the check
    compared), run through the whole decoder file once as repro.py runs it."""

    step: int  # the generation step: 0 is the prompt pass
    past_length: int  # the past's length fed at that step
    model: str  # the decoder file it runs: `<name>.onnx`, beside the folder as published
    optimization: str  # onnxruntime's graph optimization level the check ran the file at
    batch_size: int  # the failing batch
    rows: tuple[int, ...]  # the prompt rows the arrays hold: the batch's, or its failing one
    inputs: tuple[str, ...]  # step_inputs.npz's keys: the decoder file's inputs
    outputs: tuple[str, ...]  # step_expected.npz's PyTorch outputs (logits, present.N...)
    # What repro.py prints for the step, measured in the worker (None: not run): the largest
    # max abs diff over the outputs, the compared positions only.
    max_abs_diff: float | None
    reproduces: bool  # an output is outside the tolerance
    size_bytes: int  # the two files together
    omitted: str | None = None  # why the arrays are not in the folder (None: they are)


@dataclass(frozen=True)
class Bundle:
    """A folder one runtime loads unchanged (`bundle`): `<model>.<suffix>/` holding the decoder
    as `model.onnx` (its external data copied beside it) and these JSON documents, which the
    worker rendered from the model's config; publishing writes the folder (bundle_files.py)."""

    runtime: str  # "onnxruntime-genai", "optimum"
    suffix: str  # the folder's: "genai", "optimum"
    documents: dict[str, dict[str, Any]]  # file name -> its JSON document


@dataclass(frozen=True)
class RuntimeGeneration:
    """The prompts generated by a runtime's own loop (`runtime`) from its bundle, one prompt at
    a time and unpadded, against PyTorch's greedy tokens for the same unpadded prompt."""

    runtime: str  # "onnxruntime-genai"
    steps: int  # tokens asked for after each prompt
    tokens_agree: tuple[int, ...]  # per prompt row: tokens equal before the first difference
    # per prompt row: tokens compared (fewer than `steps` where the runtime stopped at its
    # end-of-sequence token, which PyTorch picked there too)
    compared: tuple[int, ...]
    first_token_difference: TokenDifference | None


@dataclass(frozen=True)
class RoutingChange:
    """A mixture-of-experts variant's routers against the fp32 file's, at the prompts' pass:
    how many (token, router) choices picked another top-k set of experts."""

    changed: int
    choices: int  # (token, router) pairs compared, padded positions left out
    routers: int  # the TopK nodes both files hold

    @property
    def share(self) -> float:
        return self.changed / self.choices


@dataclass(frozen=True)
class TextScore:
    """A variant's decoder file scored teacher-forced on `eval-tokens` beside PyTorch fp32: the
    negative log-likelihood per token (natural log) of each, over the same positions."""

    file: str  # the eval-tokens file, as the user wrote it
    rows: int
    tokens: int  # the positions scored: each text token after a row's first
    fp32_nll: float
    nll: float
    top1_agreement: float  # the share of those positions whose argmax agrees with PyTorch's

    @property
    def fp32_perplexity(self) -> float:
        return _exp(self.fp32_nll)

    @property
    def perplexity(self) -> float:
        return _exp(self.nll)

    @property
    def ratio(self) -> float:
        """The variant's perplexity over fp32's."""
        return _exp(self.nll - self.fp32_nll)


def _exp(value: float) -> float:
    """math.exp, infinite past float's range (a broken variant's NLL) rather than raising."""
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf
