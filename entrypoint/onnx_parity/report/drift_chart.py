"""The drift along the graph of a localised failure, as a Mermaid `xychart-beta` block.

GitHub draws ```` ```mermaid ```` blocks in comments itself, so the picture needs no image
hosting. One bar per compared value, in graph order: log10 of its max abs diff against
PyTorch; the line is log10(atol); the first diverging value's label starts with ▲. A long graph
is drawn in at most `MAX_BARS` bars, each the largest of that many consecutive values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from onnx_parity.results import Divergence, NodeCheck

MAX_BARS = 40
FIRST_MARK = "▲"
LABEL_CHARACTERS = re.compile(r"[^A-Za-z0-9_.:/-]+")
LABEL_LENGTH = 18


@dataclass(frozen=True)
class Bar:
    label: str
    max_abs_diff: float  # the largest of the values the bar stands for (0, finite or inf)
    first: bool  # holds the first diverging value


@dataclass(frozen=True)
class Axis:
    low: int  # where an exact match (diff 0) is drawn
    high: int  # where an infinite or NaN diff is drawn


def drift_chart(name: str, divergence: Divergence) -> list[str]:
    """The caption and the block; nothing when fewer than two values were compared."""
    compared = [node for node in divergence.nodes if node.max_abs_diff is not None]
    if len(compared) < 2:
        return []
    bars = _bars(compared)
    axis = _axis(bars, divergence.atol)
    tolerance = f"{math.log10(divergence.atol):.2f}" if divergence.atol > 0 else None
    lines = ["", _caption(divergence, compared, bars, axis, tolerance), "", "```mermaid",
             "xychart-beta",
             f'    title "{name}: drift along the graph"',
             '    x-axis "compared values, in graph order" ['
             + ", ".join(f'"{bar.label}"' for bar in bars) + "]",
             f'    y-axis "log10 max abs diff" {axis.low} --> {axis.high}',
             "    bar [" + ", ".join(_height(bar.max_abs_diff, axis) for bar in bars) + "]"]
    if tolerance is not None:
        lines.append("    line [" + ", ".join([tolerance] * len(bars)) + "]")
    return [*lines, "```"]


def _bars(compared: list[NodeCheck]) -> list[Bar]:
    size = math.ceil(len(compared) / MAX_BARS)
    bars = []
    for start in range(0, len(compared), size):
        group = compared[start:start + size]
        first = any(node.first for node in group)
        if size == 1:
            label = f"{start + 1} {_short_op(group[0])}"
        else:
            label = f"{start + 1}-{start + len(group)}"
        bars.append(Bar(f"{FIRST_MARK} {label}" if first else label,
                        max(_diff(node) for node in group), first))
    return bars


def _diff(node: NodeCheck) -> float:
    value = node.max_abs_diff
    return math.inf if value is None or math.isnan(value) else value


def _short_op(node: NodeCheck) -> str:
    """`aten._fft_r2c.default` -> `_fft_r2c`; an ONNX op type or the value's name as it is."""
    op = node.op or node.node
    if op.startswith("aten."):
        op = op.removeprefix("aten.").removesuffix(".default")
    return LABEL_CHARACTERS.sub("", op)[:LABEL_LENGTH] or "value"


def _axis(bars: list[Bar], atol: float) -> Axis:
    logs = [math.log10(bar.max_abs_diff) for bar in bars
            if 0 < bar.max_abs_diff < math.inf]
    if atol > 0:
        logs.append(math.log10(atol))
    if not logs:
        return Axis(-1, 1)
    return Axis(math.floor(min(logs)) - 1, math.ceil(max(logs)) + 1)


def _height(value: float, axis: Axis) -> str:
    if value == 0:
        return str(axis.low)
    if value == math.inf:
        return str(axis.high)
    return f"{math.log10(value):.2f}"


def _caption(divergence: Divergence, compared: list[NodeCheck], bars: list[Bar], axis: Axis,
             tolerance: str | None) -> str:
    text = (f"**Drift along the graph** (output `{divergence.output}`, batch "
            f"{divergence.batch_size}, graph optimizations {divergence.optimization}): each bar "
            f"is log10 of the max abs diff against PyTorch of ")
    if len(bars) == len(compared):
        text += f"one of the {len(compared)} compared values, in graph order"
    else:
        per_bar = math.ceil(len(compared) / MAX_BARS)
        text += (f"{per_bar} consecutive values (the largest of them; {len(compared)} "
                 f"compared, in graph order)")
    if tolerance is not None:
        text += f"; the line is log10(atol) = {tolerance}"
    first = divergence.first
    if first is not None:
        where = f" at `{first.file}:{first.line}`" if first.file and first.line else ""
        text += f"; {FIRST_MARK} marks the first diverging value, `{first.node}`{where}"
    if any(bar.max_abs_diff == 0 for bar in bars):
        text += f". A value equal to PyTorch's is drawn at {axis.low}"
    if any(bar.max_abs_diff == math.inf for bar in bars):
        text += f". An infinite or NaN difference is drawn at {axis.high}"
    return text + "."
