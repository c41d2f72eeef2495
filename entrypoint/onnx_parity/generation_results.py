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
