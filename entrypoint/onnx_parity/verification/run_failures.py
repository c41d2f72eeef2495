"""PyTorch or onnxruntime could not run the model on the samples: the `runtime-error` finding."""

from __future__ import annotations

from pathlib import Path

from onnx_parity.findings import Finding
from onnx_parity.locations import error_location
from onnx_parity.models import ReferenceFailure
from onnx_parity.verification.runtime import RuntimeFailure


def reference_finding(error: ReferenceFailure, size: int, repo: Path) -> Finding:
    """PyTorch fails on the samples themselves: name the user's line and the likely fix."""
    file, line = error_location(error.cause, repo)
    where = f" at {file}:{line}" if file else ""
    return Finding(
        "runtime-error",
        f"PyTorch fails on the samples at batch {size}{where}: {error}",
        file=file, line=line, evidence=str(error),
        fix=("Make forward run on the samples (their shape and dtype, axis 0 = samples): "
             "`python -c` with the same tensors reproduces it."),
    )


def runtime_finding(what: str, error: RuntimeFailure) -> Finding:
    return Finding("runtime-error", f"{what}: {error.message}{native_line(error)}",
                   evidence="\n".join(error.native) or error.message)


def native_line(error: RuntimeFailure) -> str:
    """onnxruntime's last native log line, as it is quoted after a failure's message."""
    return f" (onnxruntime log: {error.native[-1]})" if error.native else ""
