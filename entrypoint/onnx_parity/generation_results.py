"""What the check of a generating model (`generate`) found, which results.py's ModelResult
holds: greedy decoding in PyTorch and onnxruntime compared step by step (results.py owns this
module; it imports nothing of the package)."""

from __future__ import annotations

import math
from dataclasses import dataclass


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
class GenerationResult:
    """Greedy decoding of every committed prompt, PyTorch's and onnxruntime's side by side."""

    steps: int  # forward passes: the prompt's (step 0), then one new token each
    rows: int  # the prompts
    tokens_agree: tuple[int, ...]  # per row: steps whose tokens agreed before the first miss
    first_token_difference: TokenDifference | None
    max_logit_diff: tuple[float, ...]  # per step, padded positions left out
    teacher_forced_from: int | None  # the step after the first difference, when one ran

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
        return math.exp(self.fp32_nll)

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll)

    @property
    def ratio(self) -> float:
        """The variant's perplexity over fp32's."""
        return math.exp(self.nll - self.fp32_nll)
