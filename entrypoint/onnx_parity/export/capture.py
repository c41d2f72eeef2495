"""Capture what an exporter says: Python warnings with their source, and its console output.

The dynamo exporter prints emoji progress and colours its errors; an ascii console would turn
that into a UnicodeEncodeError that hides the real error. Everything is captured as text,
ANSI codes stripped, and handed to the model's log instead of the user's console.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from onnx_parity.ansi import strip_ansi


@dataclass(frozen=True)
class CapturedWarning:
    category: str
    message: str
    file: str
    line: int

    def describe(self) -> str:
        return f"{self.file}:{self.line}: {self.category}: {self.message}"


@dataclass
class Capture:
    """Filled while the `captured()` block runs."""

    warnings: list[CapturedWarning] = field(default_factory=list)
    output: str = ""
    # True when the output went straight into the model's log file (in a worker) and was
    # read back from there: nothing to copy into the log afterwards.
    logged: bool = False


@contextlib.contextmanager
def captured() -> Iterator[Capture]:
    """Record every warning and everything the block prints, from Python or from C++.

    The TorchScript exporter prints the graph at its failure point from C++ straight to
    file descriptor 1; that text names the user's file and line, so it must be kept too.
    """
    result = Capture(logged=_writes_to_log((1, 2)))
    buffer = io.StringIO()
    python_streams = contextlib.nullcontext() if result.logged else _python_streams(buffer)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        try:
            with native_output((1, 2)) as native, python_streams:
                yield result
        finally:
            result.output = strip_ansi(buffer.getvalue() + "\n".join(native)).strip()
            result.warnings.extend(_convert(record) for record in records)


@contextlib.contextmanager
def _python_streams(buffer: io.StringIO) -> Iterator[None]:
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        yield


def _convert(record: warnings.WarningMessage) -> CapturedWarning:
    return CapturedWarning(
        category=record.category.__name__,
        message=strip_ansi(str(record.message)),
        file=str(record.filename),
        line=int(record.lineno or 0),
    )


@contextlib.contextmanager
def native_stderr() -> Iterator[list[str]]:
    """Capture file descriptor 2: onnxruntime's C++ logger writes there, bypassing Python."""
    with native_output((2,)) as lines:
        yield lines


@contextlib.contextmanager
def native_output(fds: tuple[int, ...]) -> Iterator[list[str]]:
    """Capture file descriptors (not just sys.stdout): C++ code writes to them directly.

    Yields a list that receives the captured lines (ANSI stripped) when the block ends.
    """
    if _writes_to_log(fds):
        with _read_back(fds[0]) as logged:
            yield logged
        return
    lines: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    with tempfile.TemporaryFile() as sink:
        for fd in fds:
            os.dup2(sink.fileno(), fd)
        try:
            yield lines
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            text = strip_ansi(sink.read().decode("utf-8", "replace"))
            lines.extend(line for line in text.splitlines() if line.strip())


@contextlib.contextmanager
def unlogged(fds: tuple[int, ...] = (1, 2)) -> Iterator[None]:
    """Nothing the block writes to these file descriptors reaches the model's log: a trace
    exported only to be read prints its whole graph (`verbose=True`), megabytes for a large
    model. A `captured()` inside the block still gets its text."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    with open(os.devnull, "wb") as null:
        for fd in fds:
            os.dup2(null.fileno(), fd)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def _writes_to_log(fds: tuple[int, ...]) -> bool:
    """In a worker, fds 1 and 2 are the model's log file: leave them there.

    Whatever is written during an export then survives a segfault or a kill of the worker
    (a temporary file would vanish with it), and is read back for parsing.
    """
    try:
        stats = [os.fstat(fd) for fd in fds]
    except OSError:
        return False
    same = len({(st.st_dev, st.st_ino) for st in stats}) == 1
    return same and stat.S_ISREG(stats[0].st_mode) and os.path.exists(f"/proc/self/fd/{fds[0]}")


@contextlib.contextmanager
def _read_back(fd: int) -> Iterator[list[str]]:
    """Yield a list that receives what was appended to the file behind `fd` meanwhile."""
    lines: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    start = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        yield lines
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        with open(f"/proc/self/fd/{fd}", "rb") as log:
            log.seek(start)
            text = strip_ansi(log.read().decode("utf-8", "replace"))
        lines.extend(line for line in text.splitlines() if line.strip())
