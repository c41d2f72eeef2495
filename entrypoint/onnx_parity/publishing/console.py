"""What `onnx-parity check` shows while models run: a progress line per model step.

On a terminal a live view (publishing/live_console.py, drawn with rich) takes the place of the
progress lines; anywhere else (CI logs, pipes, `NO_COLOR`, `TERM=dumb`) the lines are
printed exactly as before. rich is imported only when the live view is chosen, so `--help`
and every non-terminal run never load it. The verdict table printed after the run, and the
text of each cell, are report/console_text.py's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Protocol, Self, TextIO

from onnx_parity.results import ModelResult


class Progress:
    """Receives the workers' step events; prints one line each with the elapsed time."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, model: str, step: str, _seconds: float) -> None:
        # An EventSink: the step's own duration is not printed, the run's elapsed time is.
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"[{elapsed:6.1f}s] {model}: {step}\n")
        self.stream.flush()


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

    def model_done(self, _result: ModelResult) -> None:
        return None  # the verdict table after the run shows every result


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
