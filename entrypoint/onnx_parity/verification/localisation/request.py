"""What localising needs (`Localisation`), all of it in the worker's memory.

A module of its own because both ways of finding the place take it: the per-node rule
(localise.py) and the bisection over the graph (reduce.py), which localise.py calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.model_files import ModelFile
from onnx_parity.models import BoundInputs
from onnx_parity.results import ExportAttempt
from onnx_parity.settings import ModelSpec


@dataclass(frozen=True)
class Localisation:
    """What localising needs, all of it in the worker's memory."""

    module: Any  # the user's nn.Module (the reference)
    program: Any  # dynamo's ONNXProgram, or None for TorchScript
    exporter: str
    model: ModelFile  # the shipped model
    bound: BoundInputs
    spec: ModelSpec
    repo: Path
    deadline: float  # time.monotonic() by which it must be done (the model's timeout)
    # The export's attempts: whether dynamo, whose graph records lines, exports this model.
    attempts: tuple[ExportAttempt, ...] = ()
