"""What the check of a generating model (`generate`) found, which results.py's ModelResult
holds: greedy decoding in PyTorch and onnxruntime compared step by step (results.py owns this
module; it imports nothing of the package)."""

from __future__ import annotations

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
    """A position threshold of the model's config (models/thresholds.py) and the decoding steps
    run across it: total lengths T - 1, T and T + 1 (past lengths T - 2, T - 1, T)."""

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
class GenerationResult:
    """Greedy decoding of every committed prompt, PyTorch's and onnxruntime's side by side."""

    steps: int  # forward passes: the prompt's (step 0), then one new token each
    rows: int  # the prompts
    tokens_agree: tuple[int, ...]  # per row: steps whose tokens agreed before the first miss
    first_token_difference: TokenDifference | None
    max_logit_diff: tuple[float, ...]  # per step, padded positions left out
    teacher_forced_from: int | None  # the step after the first difference, when one ran
    thresholds: tuple[ThresholdRun, ...] = ()  # position thresholds crossed (or not, and why)

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
