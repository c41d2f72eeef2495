"""A model that cannot be built or whose samples cannot be read: the `load-error` finding."""

from __future__ import annotations

from onnx_parity.errors import ModelProblem
from onnx_parity.findings import Finding


class LoadError(ModelProblem):
    """The model could not be built; carries the user's file and line where known."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None, *,
                 fix: str | None = None):
        super().__init__(message, fix)
        self.file = file
        self.line = line


class SampleError(LoadError):
    """A sample file is missing, unreadable or unsafe; the text names the file, key and fix."""


def load_finding(error: LoadError) -> Finding:
    return Finding("load-error", str(error), file=error.file, line=error.line, fix=error.fix)
