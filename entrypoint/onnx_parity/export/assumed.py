"""What one exported model assumed of its declared dimensions, read once after the export.

A dynamo export: the guards and ranges its program kept (guards.py), read as assumptions on the
configured dimensions (assumptions.py). A TorchScript export: the constant shape arguments that
hold a declared dimension's export size (constant_shapes.py), located in the module, kept where
a trace at another length changes them, and the Python loops the trace unrolled (unrolled.py).
Nothing is judged here: verification runs the lengths and decides what the ONNX file got wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.export.assumptions import Axis, ShapeAssumption, read_assumptions
from onnx_parity.export.constant_shapes import ConstantShape, constant_shape_evidence, located
from onnx_parity.export.exporters import Exported, ExportRequest
from onnx_parity.export.guards import recorded_guards
from onnx_parity.export.unrolled import Retrace, UnrolledLoop, moving, unrolled_loops, without
from onnx_parity.models import Dimension


@dataclass(frozen=True)
class AssumedShapes:
    assumptions: tuple[ShapeAssumption, ...] = ()  # a dynamo export's guards and ranges
    constant_shapes: tuple[ConstantShape, ...] = ()  # a TorchScript export's baked sizes
    loops: tuple[UnrolledLoop, ...] = ()  # the loops a TorchScript trace unrolled


def read_assumed(exported: Exported, request: ExportRequest, dims: Sequence[Dimension],
                 repo: Path, retraces: tuple[Retrace, ...] = ()) -> AssumedShapes:
    """`exported`: its program (dynamo's ONNXProgram, None for TorchScript) and its file;
    `retraces`: its TorchScript traces at other lengths (one per declared dimension)."""
    program, model = exported.program, exported.model.path
    if exported.exporter == "dynamo":
        if program is None:
            return AssumedShapes()
        guards, sizes = recorded_guards(program.exported_program)
        found = read_assumptions(guards, sizes, _names(request), repo)
        if exported.uncaptured is not None:  # torch.onnx's own capture keeps no guard to read
            found += tuple(ShapeAssumption(dimension.name, "uncaptured", exported.uncaptured,
                                           "", "", ()) for dimension in dims)
        for assumption in found:
            where = f"{assumption.file}:{assumption.line}" if assumption.file else \
                assumption.origin or "no line"
            print(f"--- the export assumed {assumption.condition} ({where}): "
                  f"{assumption.guard}", flush=True)
        return AssumedShapes(assumptions=found)
    shapes = constant_shape_evidence(model, _export_sizes(request, dims))
    loops = unrolled_loops(model, retraces, repo)
    for loop in loops:
        print(f"--- the trace unrolled {loop.describe()}", flush=True)
    return AssumedShapes(constant_shapes=located(without(moving(shapes, retraces), loops),
                                                 request.module, repo), loops=loops)


def _names(request: ExportRequest) -> dict[Axis, str]:
    """(forward's parameter, axis) -> the dimension's configured name."""
    return {(request.parameter(name), axis): label
            for name in request.input_names
            for axis, label in request.dynamic_axes.get(name, {}).items()}


def _export_sizes(request: ExportRequest, dims: Sequence[Dimension]) -> dict[str, int]:
    """Each declared dimension's size in the export feed (a length 1 widened to 2 shows)."""
    tensors = dict(zip(request.input_names[:len(request.args)], request.args, strict=False))
    tensors |= {name: request.kwargs[request.parameter(name)]
                for name in request.input_names[len(request.args):]
                if request.parameter(name) in request.kwargs}
    sizes: dict[str, int] = {}
    for dimension in dims:
        name, axis = dimension.members[0]
        if name in tensors:
            sizes[dimension.name] = int(tensors[name].shape[axis])
    return sizes
