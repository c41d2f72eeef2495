"""A model's log as evidence: its last lines, with faulthandler's stack dumps condensed."""

from __future__ import annotations

import os
import re
from pathlib import Path

from onnx_parity.ansi import strip_ansi

LOG_TAIL_LINES = 40
_LOG_TAIL_BYTES = 64 * 1024
STACK_DUMP_FRAMES = 12
DUMP_HEADER = re.compile(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
_FRAME = re.compile(r'  File ".*", line \d+ in ')
# The isolation machinery's own frames, at the bottom of every dump: not the model's.
_OUR_FRAME = re.compile(
    r'  File "(<frozen runpy>|.*[/\\]onnx_parity[/\\]isolation[/\\](zygote|worker)\.py)"'
)


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            text = log.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(condense_stack_dumps(strip_ansi(text).splitlines())[-lines:])


def condense_stack_dumps(lines: list[str]) -> list[str]:
    """Shorten faulthandler dumps (timeouts, crashes) to what locates the problem.

    Dumps list the innermost call first and end with the worker's own machinery, which a log
    tail would show instead of the model's line: drop our frames, keep each thread's first
    STACK_DUMP_FRAMES frames.
    """
    kept: list[str] = []
    frames: int | None = None  # frames seen in the current dump block, None outside one
    for line in lines:
        if DUMP_HEADER.match(line):
            frames = 0
        elif frames is not None and _FRAME.match(line):
            if not _OUR_FRAME.match(line):
                frames += 1
                if frames <= STACK_DUMP_FRAMES:
                    kept.append(line)
                elif frames == STACK_DUMP_FRAMES + 1:
                    kept.append("  ...")
            continue
        else:
            frames = None
        kept.append(line)
    return kept
