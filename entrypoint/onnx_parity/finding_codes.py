"""The finding codes as one type, and what the catalogue says of each (findings.py owns this
module and re-exports its names: import them from onnx_parity.findings).

`Code` spells the codes as one type, so a misspelt code is a mypy error, not a finding that
never matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal, TypeAlias, get_args


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


Code: TypeAlias = Literal[
    "parity-mismatch", "frozen-dimension", "data-dependent-branch", "tracer-warning",
    "unsupported-operator", "exporter-fallback", "opset-mismatch", "onnx-checker",
    "shape-mismatch", "dtype-mismatch", "nan-or-inf", "training-mode", "golden-mismatch",
    "load-error", "export-error", "runtime-error", "crash", "timeout", "variant-degraded",
    "fp16-overflow", "variant-error", "out-of-memory", "optimizer-drift", "shape-not-checked",
    "positional-binding", "drift-regression",
    "output-layout",
    "shape-assumption",
    "length-mismatch",
    "nondeterministic-model",
    "runtime-unsupported",
    "generation-mismatch",
    "bundle-error",
    "position-threshold",
    "int4-token-difference",
    "detection-mismatch",
    "detection-near-threshold",
    "expert-coverage",
    "expert-dispatch-loop",
]
CODES: tuple[Code, ...] = get_args(Code)


@dataclass(frozen=True)
class CodeInfo:
    severity: Severity
    title: str
    fix: str
    # A result with this code is never cached: it depends on the machine (a crash, a timeout,
    # the memory) or on a file that may appear later (a load error), so it always runs again.
    cached: bool = True
    # A failing model with this code is localised to its first diverging node
    # (verification/localisation/localise.py).
    localised: bool = False
    # It explains a parity mismatch by itself: no tolerance would make such an export right.
    explains_mismatch: bool = False


def parse_code(text: object) -> Code:
    """A code read back from JSON, checked against the vocabulary."""
    for code in CODES:
        if code == text:
            return code
    raise ValueError(f"unknown finding code {text!r}")
