"""The gate: whether a run passes under `fail-on`, for `check --fail-on` and the action alike.

`regression` fails only on error findings the baseline did not have for that model (compared
by code), so a repository with known failures can adopt the check without being blocked by
them: a new model counts in full, and without a baseline every error counts (as `error`).
"""

from __future__ import annotations

from enum import Enum

from onnx_parity.findings import Finding, Severity
from onnx_parity.results import ModelResult, RunResult


class FailOn(str, Enum):
    """Which findings fail the step or the command (exit code 1)."""

    ERROR = "error"
    WARNING = "warning"
    NEVER = "never"
    REGRESSION = "regression"


def gate_passed(run: RunResult, fail_on: FailOn) -> bool:
    """error: no error finding; warning: no error or warning finding; never: always passes;
    regression: no error finding the baseline did not have for that model."""
    return not any(failing_findings(model, fail_on) for model in run.models)


def failing_findings(model: ModelResult, fail_on: FailOn) -> tuple[Finding, ...]:
    if fail_on == FailOn.NEVER:
        return ()
    if fail_on == FailOn.WARNING:
        return tuple(f for f in model.findings if f.severity in (Severity.ERROR, Severity.WARNING))
    errors = tuple(f for f in model.findings if f.severity == Severity.ERROR)
    if fail_on == FailOn.REGRESSION and model.base is not None:
        return tuple(f for f in errors if f.code not in model.base.error_codes)
    return errors
