"""The one error taxonomy, and the one table of exit codes.

Every exception this package raises on purpose derives from `OnnxParityError`:

- `UserError`: the user's to fix (configuration, command line, action inputs, event, output
  folder, report file, fork policy, requirements). The command line and the action both end
  with exit code 2 and print its text, which names the file, the key or input, and the fix.
  Each stage declares its own subclass beside its code; `title` is how the action labels it.
- `ModelProblem`: one model's samples, model, export or runtime failed. It never ends the
  run: the stage that meets it turns it into a finding of that model.
- anything else derived from `OnnxParityError` (a misused worker pool, a GitHub request that
  failed for good) is handled where it happens or is a bug (exit 3).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What `onnx-parity check`, `merge`, `comment` and the action exit with.

    Each member's meaning is the text of docs/reference/exit-codes.md.
    """

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    PASSED = 0, "Every model passed, or the `fail-on` gate let the run pass."
    FAILED = 1, "At least one model did not pass the `fail-on` gate."
    INVALID = 2, ("Bad input (configuration, command line, action inputs, event, output "
                  "folder, report file): the message names the file, the key or input, and "
                  "the fix.")
    INTERNAL = 3, "A bug in onnx-parity: re-run with `--debug` for the traceback and report it."


class OnnxParityError(Exception):
    """Base of every error onnx-parity raises on purpose."""


class UserError(OnnxParityError):
    """Something the user must fix before the check can run; exit code 2."""

    title = "invalid input"


class ModelProblem(OnnxParityError):
    """One model could not be loaded, exported or run; it becomes that model's finding.

    The text says what failed and where; `fix`, when the raiser knows the cause, is what the
    user does about it, and becomes the finding's one fix (else the catalogue's applies).
    """

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.fix = fix


def exit_code_for(error: BaseException) -> ExitCode:
    """INVALID for the user's mistakes, INTERNAL for everything else (bugs)."""
    return ExitCode.INVALID if isinstance(error, UserError) else ExitCode.INTERNAL
