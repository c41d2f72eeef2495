"""Run one exporter (dynamo or the legacy TorchScript tracer) and say precisely why it failed."""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass
from typing import Any

from onnx_parity.export.capture import CapturedWarning, captured, strip_ansi


@dataclass(frozen=True)
class ExportRequest:
    module: Any  # torch.nn.Module
    args: tuple[Any, ...]  # tensors in forward-parameter order
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]
    opset: int


@dataclass(frozen=True)
class Exported:
    exporter: str
    model_bytes: bytes
    warnings: tuple[CapturedWarning, ...]
    output: str
    seconds: float
    output_logged: bool = False  # the output already sits in the model's log


class ExportError(Exception):
    """One exporter failed; `kind` is the finding code the failure maps to."""

    def __init__(self, exporter: str, kind: str, message: str, *, operator: str | None = None,
                 location: tuple[str, int] | None = None, output: str = "",
                 warnings: tuple[CapturedWarning, ...] = (), seconds: float = 0.0):
        super().__init__(message)
        self.exporter = exporter
        self.kind = kind
        self.message = message
        self.operator = operator
        self.location = location
        self.output = output
        self.warnings = warnings
        self.seconds = seconds
        self.output_logged = False


def export(exporter: str, request: ExportRequest) -> Exported:
    run = _dynamo if exporter == "dynamo" else _torchscript
    started = time.perf_counter()
    with captured() as capture:
        try:
            model_bytes = run(request)
        except Exception as error:  # every exporter failure becomes evidence, never a crash
            failure = error
        else:
            failure = None
    seconds = time.perf_counter() - started
    if failure is not None:
        error = classify(exporter, failure, capture.output, tuple(capture.warnings), seconds)
        error.output_logged = capture.logged
        raise error
    return Exported(exporter, model_bytes, tuple(capture.warnings), capture.output, seconds,
                    capture.logged)


def _dynamo(request: ExportRequest) -> bytes:
    import torch

    shapes = {
        name: dict(request.dynamic_axes[name]) if name in request.dynamic_axes else None
        for name in request.input_names
    }
    program = torch.onnx.export(
        request.module,
        request.args,
        dynamo=True,
        opset_version=request.opset,
        input_names=list(request.input_names),
        output_names=list(request.output_names) or None,
        dynamic_shapes=shapes if any(shapes.values()) else None,
        verbose=False,
        report=False,
    )
    return program.model_proto.SerializeToString()


def _torchscript(request: ExportRequest) -> bytes:
    import torch

    buffer = io.BytesIO()
    known = set(request.input_names) | set(request.output_names)
    torch.onnx.export(
        request.module,
        request.args,
        buffer,
        dynamo=False,
        opset_version=request.opset,
        input_names=list(request.input_names),
        output_names=list(request.output_names) or None,
        dynamic_axes={k: v for k, v in request.dynamic_axes.items() if k in known} or None,
    )
    return buffer.getvalue()


OPERATOR = re.compile(r"operator '([\w:.]+)'|\b(aten[.:]{1,2}[\w.]+)")
USER_CALL = re.compile(r'File "([^"]+)", line (\d+)')


def classify(exporter: str, error: BaseException, output: str,
             warnings: tuple[CapturedWarning, ...], seconds: float) -> ExportError:
    chain = _chain(error)
    names = {type(item).__name__ for item in chain}
    message = summarize(error)
    location = _first_location(strip_ansi(str(error)))
    extra = dict(output=output, warnings=warnings, seconds=seconds)
    if names & {"GuardOnDataDependentSymNode", "UserError"} and "data-dependent" in str(error):
        return ExportError(exporter, "data-dependent-branch", message, location=location, **extra)
    if "UnsupportedOperatorError" in names or _mentions_unsupported(str(error)):
        operator = _operator(str(error))
        location = location or _graph_location(operator, output)
        return ExportError(exporter, "unsupported-operator", message, operator=operator,
                           location=location, **extra)
    return ExportError(exporter, "export-error", message, location=location, **extra)


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _mentions_unsupported(text: str) -> bool:
    lowered = text.lower()
    return any(
        phrase in lowered
        for phrase in ("unsupported fx nodes", "no onnx function found", "is not supported",
                       "no decomposition", "unsupported operator")
    )


def _operator(text: str) -> str | None:
    match = OPERATOR.search(strip_ansi(text))
    if not match:
        return None
    return (match.group(1) or match.group(2)).replace(".default", "")


def _graph_location(operator: str | None, output: str) -> tuple[str, int] | None:
    """The TorchScript graph printed at the failure names the source line of each node."""
    if not operator:
        return None
    for line in output.splitlines():
        if f"{operator}(" in line:
            match = GRAPH_SOURCE.search(line)
            if match:
                return match.group(1), int(match.group(2))
    return None


GRAPH_SOURCE = re.compile(r"# (\S+\.py):(\d+):\d+\s*$")


def _first_location(text: str) -> tuple[str, int] | None:
    matches = USER_CALL.findall(text)
    if not matches:
        return None
    path, line = matches[-1]
    return path, int(line)


def summarize(error: BaseException, limit: int = 600) -> str:
    """The root cause in a line or two: the exporters' own text is pages long."""
    root = _chain(error)[-1]
    text = strip_ansi(str(root)).strip() or type(root).__name__
    if root is not error and "Exception summary" in str(error):
        text = _summary_section(strip_ansi(str(error))) or text
    first = " ".join(text.split("\n\n")[0].split())
    line = f"{type(root).__name__}: {first}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _summary_section(text: str) -> str | None:
    _, _, rest = text.partition("## Exception summary")
    body = rest.strip().split("\n\n")[0].strip()
    return re.sub(r"^<class '[\w.]+'>:\s*", "", body) or None
