"""What `onnx-parity check` prints: a progress line per model step, then the verdict table.

On a terminal a live view (publishing/live_console.py, drawn with rich) takes the place of the
progress lines; anywhere else (CI logs, pipes, `NO_COLOR`, `TERM=dumb`) the lines are
printed exactly as before. rich is imported only when the live view is chosen, so `--help`
and every non-terminal run never load it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Protocol, Self, TextIO

from onnx_parity.results import ModelResult, RunResult
from onnx_parity.verification.node_sources import first_sentence


class Progress:
    """Receives the workers' step events; prints one line each with the elapsed time."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, model: str, step: str, seconds: float) -> None:
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"[{elapsed:6.1f}s] {model}: {step}\n")
        self.stream.flush()


def verdict_table(run: RunResult) -> str:
    header = ("", "model", "exporter", "opset", "max abs diff", "atol", "batches", "findings")
    rows = [header] + [
        ("PASS" if m.passed else "FAIL", m.name, m.exporter or "-", str(m.opset or "-"),
         "-" if m.max_abs_diff is None else f"{m.max_abs_diff:.2e}", f"{m.atol:g}",
         ",".join(map(str, m.batch_sizes)),
         ", ".join(dict.fromkeys(f"{f.code}({f.severity.value})" for f in m.findings)) or "-")
        for m in run.models
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    # The last column is not padded: zip stops at the widths of the others.
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
             + "  " + row[-1] for row in rows]
    passed = sum(m.passed for m in run.models)
    lines.append(f"{passed} of {len(run.models)} models pass")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def divergence_lines(run: RunResult) -> str:
    """For each localised mismatch: where it diverges first, then the source line."""
    lines: list[str] = []
    for model in run.models:
        for finding in model.findings:
            details = finding.details.get("first_divergence")
            if isinstance(details, dict):
                sentence = first_sentence(details).replace('`', '')
                lines.append(f"{model.name}: {sentence[:1].lower()}{sentence[1:]}")
                if details.get("source"):
                    lines.append(f"    {details['source']}")
    return "".join(f"{line}\n" for line in lines)
class ConsoleView(Protocol):
    """What the check shows while models run: the pool's step events and each model's result."""

    def __enter__(self) -> Self: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None: ...

    def event(self, model: str, step: str, seconds: float) -> None: ...

    def model_done(self, result: ModelResult) -> None: ...


class PlainConsole:
    """Today's output: one `[elapsed] model: step` line per event, nothing per result."""

    def __init__(self, stream: TextIO):
        self.progress = Progress(stream)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        return None

    def event(self, model: str, step: str, seconds: float) -> None:
        self.progress(model, step, seconds)

    def model_done(self, result: ModelResult) -> None:
        return None


def wants_live_view(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """A terminal that may be drawn on: a TTY, no `NO_COLOR` (any non-empty value, as
    no-color.org defines it), and a TERM other than `dumb`."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return False
    return not environ.get("NO_COLOR") and environ.get("TERM", "") != "dumb"


def open_console(stream: TextIO, environ: Mapping[str, str], models: Sequence[str],
                 config: str) -> ConsoleView:
    """The live view on a terminal, else the plain progress lines."""
    if not wants_live_view(stream, environ):
        return PlainConsole(stream)
    from onnx_parity.publishing.live_console import LiveConsole

    return LiveConsole(stream, models, config)
