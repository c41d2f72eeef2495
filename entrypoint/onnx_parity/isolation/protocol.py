"""The pool <-> zygote protocol: one JSON object per line, and the files a job leaves.

Every line is written with a single os.write of less than 4 KiB (PIPE_BUF), so lines from the
zygote and from concurrent children never interleave.
  pool -> zygote (stdin):  {"op": "run", "key": K, "job": PATH}  |  {"op": "stop"}
  zygote and children -> pool (stdout):
    {"event": "ready", "seconds": S, "warm_up": "done" | "skipped" | "failed: ..."}
    {"event": "started", "key": K, "pid": P}              (the child's first line)
    {"event": "progress", "key": K, "step": STEP, "t": T}  (T: seconds since the child started)
    {"event": "exited", "key": K, "pid": P, "status": N}   (exit code, or -signal number)
    {"event": "fork-failed", "key": K, "error": TEXT}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One protocol line, parsed: JSON values.
Message = dict[str, Any]
# POSIX guarantees writes up to PIPE_BUF (4096 on Linux) to a pipe are atomic.
MAX_LINE_BYTES = 4000
_STEP_CHARS = 1000


@dataclass(frozen=True)
class JobReturn:
    """What a child leaves in `<key>.result.pickle`: the job's value, or why there is none."""

    value: object
    error: str | None = None


def log_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.log"


def result_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.result.pickle"


def job_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.job.pickle"


def encode(message: Message) -> bytes:
    """One protocol line; a long `step` is cut so the line stays atomic on the pipe."""
    step = message.get("step")
    if isinstance(step, str) and len(step) > _STEP_CHARS:
        message = {**message, "step": step[:_STEP_CHARS] + "..."}
    line = (json.dumps(message, ensure_ascii=True) + "\n").encode("ascii")
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(
            f"protocol line of {len(line)} bytes is over {MAX_LINE_BYTES}: {line[:200]!r}"
        )
    return line


def send(fd: int, message: Message) -> None:
    os.write(fd, encode(message))


class LineBuffer:
    """Reassembles JSON lines from pipe reads, which may split or join lines anywhere."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[Message]:
        *complete, self._pending = (self._pending + data).split(b"\n")
        return [json.loads(line) for line in complete if line.strip()]
