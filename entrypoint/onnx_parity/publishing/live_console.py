"""The live view of `onnx-parity check` on a terminal, drawn with rich.

One header line (models done of total, the run's elapsed time), then one line per model:
waiting; running, with its current step and how long it has run; or finished, with its
verdict, its max abs diff against atol and the codes of its error findings (the same cells as
the verdict table, from report/console_text.py). The view is transient: when the run ends it is
erased and the check prints the same verdict table as in plain mode. Imported only by
publishing/console.py, and only for a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from onnx_parity.report import atol_text, diff_text, error_codes, verdict_word
from onnx_parity.results import ModelResult

# The pool's last event for a model: a finished job or how its worker failed.
LAST_EVENTS = ("finished", "crash", "timeout", "out-of-memory")
REFRESH_PER_SECOND = 8


@dataclass
class ModelLine:
    """What the view knows of one model."""

    name: str
    step: str = "waiting"
    started: float | None = None
    seconds: float | None = None  # set by the last event
    result: ModelResult | None = None


class LiveConsole:
    """A ConsoleView (publishing/console.py) that redraws in place."""

    def __init__(self, stream: TextIO, models: Sequence[str], config: str,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.config = config
        self.lines = {name: ModelLine(name) for name in models}
        self.spinner = Spinner("dots", style="cyan")
        self.live = Live(console=Console(file=stream, highlight=False),
                         get_renderable=self.render, refresh_per_second=REFRESH_PER_SECOND,
                         transient=True, redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> Self:
        self.live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.live.stop()

    def event(self, model: str, step: str, seconds: float) -> None:
        line = self.lines.setdefault(model, ModelLine(model))
        if step == "started":
            line.started, line.step = self.clock(), "starting"
        elif step in LAST_EVENTS:
            line.step, line.seconds = step, seconds
        else:
            line.step = step
        self.live.refresh()  # every event is drawn, whatever the refresh rate

    def model_done(self, result: ModelResult) -> None:
        self.lines.setdefault(result.name, ModelLine(result.name)).result = result
        self.live.refresh()

    def render(self) -> RenderableType:
        lines = list(self.lines.values())
        done = sum(line.result is not None for line in lines)
        header = Text.assemble(
            ("onnx-parity check", "bold"), f" · {self.config} · ",
            (f"{done} of {len(lines)} models done", "bold"),
            f" · {self.clock() - self.started:.1f} s")
        if all(line.started is None and line.result is None for line in lines):
            # The first seconds go to the workers' zygote importing torch and warming up.
            header.append(" · starting the workers (importing torch)", style="dim")
        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column(no_wrap=True)
        for line in lines:
            table.add_row(*self._row(line))
        return Group(header, table)

    def _row(self, line: ModelLine) -> tuple[RenderableType, ...]:
        if line.result is not None:
            return _verdict(line.result, line.seconds)
        if line.started is None:
            return Text("·", style="dim"), Text(line.name), Text("waiting", style="dim"), Text()
        running = f"{self.clock() - line.started:.1f} s"
        return self.spinner, Text(line.name), Text(line.step), Text(running, style="dim")


def _verdict(result: ModelResult, seconds: float | None) -> tuple[RenderableType, ...]:
    status = Text(verdict_word(result), style="bold green" if result.passed else "bold red")
    summary = f"max abs diff {diff_text(result)} (atol {atol_text(result)})"
    codes = error_codes(result)
    if codes:
        summary += " · " + ", ".join(codes)
    took = "" if seconds is None else f"{seconds:.1f} s"
    return status, Text(result.name), Text(summary), Text(took, style="dim")
