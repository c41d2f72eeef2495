"""Workflow commands and the runner's files: annotations, groups, masks, outputs, the summary.

Escaping follows the runner's own rules (actions/toolkit `command.ts`): in a message `%`, `\\r`
and `\\n` become `%25`, `%0D`, `%0A`; in a property value `:` and `,` also become `%3A`, `%2C`.
Outputs always use the multi-line form `name<<DELIMITER` with a random delimiter, so a value
can never end its own entry early or inject another output.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SUMMARY_LIMIT_BYTES = 1_048_576  # the runner refuses a step summary over 1 MiB
DETAIL_LEVELS = (2, 1, 0)  # render_markdown's detail: full, no comparisons/logs, table only


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_command(name: str, message: str = "", **properties: str | int | None) -> str:
    """`::name key=value,key=value::message` with every part escaped; None properties omitted."""
    props = ",".join(
        f"{key}={escape_property(str(value))}" for key, value in properties.items()
        if value is not None
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


class Writer(Protocol):
    """A text stream as the action writes to it (a real stream or a RedactingWriter)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class Annotation:
    level: str  # "error" | "warning" | "notice"
    message: str
    title: str | None = None
    file: str | None = None  # relative to the workspace
    line: int | None = None

    def command(self) -> str:
        return format_command(self.level, self.message, file=self.file, line=self.line,
                              title=self.title)


class WorkflowCommands:
    """Writes commands to the step's log (stdout), one per line."""

    def __init__(self, out: Writer) -> None:
        self._out = out

    def emit(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()

    def annotate(self, annotation: Annotation) -> None:
        self.emit(annotation.command())

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self.emit(format_command("group", title))
        try:
            yield
        finally:
            self.emit("::endgroup::")

    def untrusted_text(self, text: str) -> None:
        """Print text the action did not write (model logs, pip) with commands switched off.

        Between `::stop-commands::TOKEN` and `::TOKEN::` the runner ignores workflow commands,
        so a model's output cannot close our group, add annotations or masks of its own.
        """
        resume = f"onnx-parity-{secrets.token_hex(16)}"
        self.emit(f"::stop-commands::{resume}")
        self._out.write(text if text.endswith("\n") or not text else text + "\n")
        self.emit(f"::{resume}::")


def write_outputs(path: Path, outputs: dict[str, str]) -> None:
    """Append `outputs` to the GITHUB_OUTPUT file in the heredoc form."""
    with path.open("a", encoding="utf-8") as file:
        for name, value in outputs.items():
            file.write(output_entry(name, value))


def output_entry(name: str, value: str) -> str:
    delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    while delimiter in value:  # astronomically unlikely; never let the value close the entry
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


@dataclass(frozen=True)
class Fitted:
    """Markdown that fits a size limit, and how it was made to fit."""

    text: str
    detail: int  # the render_markdown detail level used
    truncated: bool
    size: int  # in the limit's unit


def fit_markdown(render: Callable[[int], str], limit: int, size: Callable[[str], int],
                 pointer: str) -> Fitted:
    """The most detailed rendering within `limit`; if even the table is too long, cut it.

    A cut ends at a line boundary, closes an open code fence and `<details>` blocks, and is
    followed by `pointer` (where the whole report is), so nothing disappears silently.
    """
    text = ""
    for detail in DETAIL_LEVELS:
        text = render(detail)
        if size(text) <= limit:
            return Fitted(text, detail, False, size(text))
    cut = truncate_markdown(text, limit - size(pointer) - size("\n\n"), size) + "\n\n" + pointer
    return Fitted(cut, DETAIL_LEVELS[-1], True, size(cut))


def truncate_markdown(text: str, budget: int, size: Callable[[str], int]) -> str:
    closers_budget = budget - size("\n```\n" + "</details>\n" * 8)
    kept: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        if used + size(line) > closers_budget:
            break
        kept.append(line)
        used += size(line)
    return "".join(kept).rstrip("\n") + _closers("".join(kept))


def _closers(text: str) -> str:
    fence = "\n```" if text.count("```") % 2 else ""
    open_details = max(0, text.count("<details") - text.count("</details>"))
    return fence + "\n</details>" * min(open_details, 8)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def write_summary(path: Path, render: Callable[[int], str], pointer: str) -> Fitted:
    """Append the most detailed report that fits what is left of the 1 MiB step summary."""
    used = path.stat().st_size if path.exists() else 0
    fitted = fit_markdown(render, SUMMARY_LIMIT_BYTES - used - 1, utf8_size, pointer)
    with path.open("a", encoding="utf-8") as file:
        file.write(fitted.text + "\n")
    return fitted
