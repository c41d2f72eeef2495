"""Run one exporter (dynamo or the legacy TorchScript tracer) and say precisely why it failed."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_parity.export.capture import CapturedWarning, captured
from onnx_parity.export.failures import AttemptLog, classify
from onnx_parity.export.guards import capture_program
from onnx_parity.export.saving import export_folder, gathered, save_program
from onnx_parity.locations import shorten
from onnx_parity.model_files import ModelFile
from onnx_parity.models import exported_experts, one_run


@dataclass(frozen=True)
class ExportRequest:
    module: Any  # torch.nn.Module
    args: tuple[Any, ...]  # tensors passed positionally
    input_names: tuple[str, ...]  # the ONNX inputs: positional, then keyword, in that order
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]  # by ONNX input or output name
    opset: int
    kwargs: dict[str, Any] = field(default_factory=dict)  # tensors passed by parameter name
    parameters: tuple[str, ...] = ()  # forward's parameter of each input name (empty: the same)
    # TorchScript only: write each node's Python stack into its doc string (`verbose=True`),
    # for a trace that is read, never shipped (it makes the file about 15 times larger).
    source_lines: bool = False

    def parameter(self, name: str) -> str:
        return self.parameters[self.input_names.index(name)] if self.parameters else name


@dataclass(frozen=True)
class Exported:
    exporter: str
    model: ModelFile  # written into the worker's work folder
    warnings: tuple[CapturedWarning, ...]
    output: str
    seconds: float
    output_logged: bool = False  # the output already sits in the model's log
    # dynamo's ONNXProgram (its exported_program localises a mismatch); kept in the worker's
    # memory only, never pickled: the result that leaves the worker does not hold it.
    program: Any = None
    # why torch.export could not capture the model with its guards (dynamo only): torch.onnx
    # captured it itself, and what that export assumed was not recorded
    uncaptured: str | None = None


def export(exporter: str, request: ExportRequest, destination: Path) -> Exported:
    """Run one exporter, its model written at `destination` (`<name>.onnx`, and its external
    data beside it when it is large); raises ExportFailure with the classified evidence."""
    run = _dynamo if exporter == "dynamo" else _torchscript
    started = time.perf_counter()
    failure: Exception | None = None
    program: Any = None
    # A trace never settles the module (models/module_state.py): torch.export's tracing
    # leaves an attribute a forward assigns holding a FakeTensor (transformers' LongRoPE
    # `long_inv_freq`), which PyTorch's later runs would then compute with. Its experts run
    # the data-independent path only while it traces (models/generating/moe.py).
    with captured() as capture, one_run(request.module, eager=False), \
            exported_experts(request.module):
        try:
            model, program, uncaptured = run(request, destination)
        except Exception as error:  # every exporter failure becomes evidence, never a crash
            failure = error
    seconds = time.perf_counter() - started
    if failure is not None:
        classified = classify(exporter, failure,
                              AttemptLog(capture.output, tuple(capture.warnings), seconds))
        classified.output_logged = capture.logged
        raise classified
    return Exported(exporter, model, tuple(capture.warnings), capture.output, seconds,
                    capture.logged, program, uncaptured)


def _dynamo(request: ExportRequest, destination: Path) -> tuple[ModelFile, Any, str | None]:
    import torch

    # Keyed by forward's parameter names (torch.export's rule); the names become symbolic
    # dims named as in dynamic-axes, and axes of one name are one dimension.
    shapes = {
        request.parameter(name):
            dict(request.dynamic_axes[name]) if name in request.dynamic_axes else None
        for name in request.input_names
    }
    dynamic = shapes if any(shapes.values()) else None
    module, uncaptured = _captured(request, dynamic)
    program = torch.onnx.export(
        module,
        request.args,
        kwargs=request.kwargs or None,
        dynamo=True,
        opset_version=request.opset,
        input_names=list(request.input_names),
        output_names=list(request.output_names) or None,
        dynamic_shapes=dynamic,  # on a captured program: the axes' names only
        verbose=False,
        report=False,
    )
    if program is None:  # torch's hints allow it; the dynamo exporter always returns one
        raise RuntimeError("torch.onnx.export(dynamo=True) returned no ONNXProgram")
    return save_program(program, destination), program, uncaptured


def _captured(request: ExportRequest, shapes: Any) -> tuple[Any, str | None]:
    """torch.export's program with its guards kept (export/guards.py); the module itself when
    torch.export alone cannot capture it, for torch.onnx's own strategies to try as before,
    with why (what that export then assumes is not recorded)."""
    try:
        return capture_program(request.module, request.args, request.kwargs, shapes), None
    except Exception as error:  # torch.onnx tries again (strict=True too), and says why
        print(f"--- torch.export.export(strict=False) failed ({type(error).__name__}): "
              "torch.onnx.export captures the model itself", flush=True)
        return request.module, _reason(error)


def _reason(error: Exception) -> str:
    """torch.export's own words: the constraints it found violated (`x.shape[1]` for its
    `L['x'].size()[1]`), else its first line."""
    lines = [line.strip(" -") for line in str(error).splitlines() if line.strip()]
    said = [line.split(". If you")[0] for line in lines
            if line.startswith(("Not all values", "You marked"))] or lines[:1]
    text = re.sub(r"L\['([^']+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", " ".join(said))
    return shorten(f"{type(error).__name__}: {text}", 400)


def _torchscript(request: ExportRequest, destination: Path) -> tuple[ModelFile, Any, None]:
    import torch

    known = set(request.input_names) | set(request.output_names)
    with export_folder(destination) as exported:
        torch.onnx.export(
            request.module,
            request.args,
            str(exported),  # past 2 GiB it writes each tensor as a file beside it
            kwargs=request.kwargs or None,
            dynamo=False,
            opset_version=request.opset,
            input_names=list(request.input_names),
            output_names=list(request.output_names) or None,
            dynamic_axes={k: v for k, v in request.dynamic_axes.items() if k in known} or None,
            verbose=request.source_lines,
        )
        return gathered(exported, destination), None, None
