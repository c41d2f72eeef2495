"""A TorchScript trace at another length: the loops it unrolled, and the constants that move.

The tracer runs forward once and records what it did: a Python loop over a declared axis
(`for t in range(x.shape[1])`) becomes as many copies of its body as the export length, each
reading its step through a `Gather` (or a `Slice`) with a constant index 0, 1, ..., L-1. The
ONNX file then computes exactly L steps at every length. A second trace with the dimension at
another length L' shows it: the run of constant indices follows the length (0..L'-1 there),
and the trace is exported with `verbose=True`, which writes each node's Python stack into its
doc string (`models/loop.py(14): forward`), so the run is named at the user's loop. The shipped
model is exported without those doc strings (they make a file 15 times larger).

The same trace decides which constant shapes holding the export size are evidence
(constant_shapes.py): one that keeps its value at L' (a hidden size of 16 that equals a time
length of 16 by chance) is not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_parity.export.constant_shapes import SHAPE_INPUTS, ConstantShape, integer_constants
from onnx_parity.locations import repo_relative, scrub_paths

if TYPE_CHECKING:  # onnx is imported when a model is read, not with this module
    from onnx import ModelProto, NodeProto

# A run shorter than this is a pair of channels as often as a loop: never evidence.
MIN_STEPS = 3
# `path(line): function`, one frame a line, innermost first (TorchScript's doc strings).
DOC_FRAME = re.compile(r"^(.+)\((\d+)\): (\S+)$")


@dataclass(frozen=True)
class Retrace:
    """The TorchScript trace of one declared dimension at another length (its file read)."""

    dimension: str
    size: int  # the dimension's export size
    other: int  # the length it was traced at again
    model: Path  # that trace, exported with its nodes' source lines


@dataclass(frozen=True)
class UnrolledLoop:
    """A Python loop over a declared dimension that the trace unrolled into its export size."""

    dimension: str
    steps: int  # the export size: the steps the ONNX file computes at every length
    op: str  # "Gather" or "Slice": how each step reads its element
    axis: int
    first: str  # the first and the last node of the run in the shipped model
    last: str
    file: str | None = None  # the loop's line in the user's code
    line: int | None = None
    origin: str | None = None  # the loop inside an installed package

    def describe(self) -> str:
        place = (f" at {self.file}:{self.line}" if self.file else
                 f" in {self.origin} (an installed package)" if self.origin else "")
        return (f"the loop{place} over {self.dimension} into {self.steps} steps: "
                f"{self.steps} {self.op} nodes ({self.first} ... {self.last}) read the constant "
                f"indices 0..{self.steps - 1} along axis {self.axis}")


def unrolled_loops(model: Path, retraces: tuple[Retrace, ...],
                   repo: Path) -> tuple[UnrolledLoop, ...]:
    """Each run of constant indices 0..L-1 in the shipped model whose counterpart in the
    dimension's retrace is 0..L'-1, named at the loop around the line that indexes."""
    shipped = _runs(_load(model))
    found: list[UnrolledLoop] = []
    for retrace in retraces:
        again = _load(retrace.model)
        for (op, axis, frame), indices in _runs(again, frames=True).items():
            steps = shipped.get((op, axis, ""), {})
            if sorted(indices) == list(range(retrace.other)) != list(range(retrace.size)) \
                    and set(range(retrace.size)) <= set(steps) and retrace.size >= MIN_STEPS:
                names = [steps[index] for index in range(retrace.size)]
                found.append(UnrolledLoop(retrace.dimension, retrace.size, op, axis, names[0],
                                          names[-1], *_loop_line(frame, repo)))
    return tuple(dict.fromkeys(found))


def moving(shapes: tuple[ConstantShape, ...],
           retraces: tuple[Retrace, ...]) -> tuple[ConstantShape, ...]:
    """The constants that change when the dimension does: a node of the same name in the
    retrace whose argument keeps the value is a size of its own, not the dimension's."""
    kept: list[ConstantShape] = []
    for retrace in retraces:
        again = _load(retrace.model)
        constants = integer_constants(again)
        nodes = {node.name: node for node in again.graph.node}
        for shape in shapes:
            if shape.dimension == retrace.dimension and not _unchanged(shape, nodes, constants):
                kept.append(shape)
    traced = {retrace.dimension for retrace in retraces}
    return tuple(shape for shape in shapes if shape in kept or shape.dimension not in traced)


def _unchanged(shape: ConstantShape, nodes: Mapping[str, NodeProto],
               constants: Mapping[str, tuple[int, ...]]) -> bool:
    node = nodes.get(shape.node)
    if node is None or node.op_type != shape.op:
        return False  # no counterpart to compare: kept as evidence, as before
    position = next(p for p, name in SHAPE_INPUTS[shape.op] if name == shape.argument)
    value = node.input[position] if position < len(node.input) else ""
    return constants.get(value) == shape.values


def _load(path: Path) -> ModelProto:
    import onnx

    return onnx.load(str(path), load_external_data=False)


def _runs(proto: ModelProto, frames: bool = False
          ) -> dict[tuple[str, int, str], dict[int, str]]:
    """(op, axis, the innermost frame of its doc string) -> constant index -> the first node
    reading it: every Gather of one scalar constant index, every Slice of one element."""
    constants = integer_constants(proto)
    runs: dict[tuple[str, int, str], dict[int, str]] = {}
    for node in proto.graph.node:
        step = _step(node, constants)
        if step is not None:
            frame = node.doc_string.split("\n", 1)[0] if frames else ""
            runs.setdefault((node.op_type, step[0], frame), {}).setdefault(step[1], node.name)
    return runs


def _step(node: NodeProto, constants: Mapping[str, tuple[int, ...]]) -> tuple[int, int] | None:
    """(axis, index) of a node reading one element at a constant index; None otherwise."""
    if node.op_type == "Gather" and len(node.input) == 2:
        index = constants.get(node.input[1], ())
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        return (axis, index[0]) if len(index) == 1 else None
    if node.op_type == "Slice" and len(node.input) >= 4:
        starts, ends, axes = (constants.get(name, ()) for name in node.input[1:4])
        if len(starts) == len(ends) == len(axes) == 1 and ends[0] == starts[0] + 1:
            return axes[0], starts[0]
    return None


def _loop_line(frame: str, repo: Path) -> tuple[str | None, int | None, str | None]:
    """(file, line, None) of the loop statement around the frame's line in the user's code;
    (None, None, `package/file.py:line`) inside an installed package."""
    match = DOC_FRAME.match(frame.strip())
    if match is None:
        return None, None, None
    path, line = match.group(1), int(match.group(2))
    line = _enclosing_loop(Path(path), line)
    file = repo_relative(path, repo)
    if file:
        return file, line, None
    origin = scrub_paths(f"{path}:{line}", (repo,))
    return None, None, origin.removeprefix("site-packages/").removeprefix("dist-packages/")


def _enclosing_loop(path: Path, line: int) -> int:
    """The innermost `for`/`while` statement or comprehension holding `line`; the line itself
    when none does (the frame names the indexing line, inside the loop's body)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return line
    loops = [node for node in ast.walk(tree)
             if isinstance(node, (ast.For, ast.While, ast.ListComp, ast.GeneratorExp))
             and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return max((node.lineno for node in loops), default=line)


def without(shapes: tuple[ConstantShape, ...], loops: tuple[UnrolledLoop, ...]
            ) -> tuple[ConstantShape, ...]:
    """Constant shapes the loops' own steps produce are the loop's evidence, not their own."""
    named = {loop.first for loop in loops} | {loop.last for loop in loops}
    return tuple(shape for shape in shapes if shape.node not in named)
