"""A TorchScript export's baked shapes: a constant shape argument that holds an export size.

The TorchScript tracer records a size read through a Python int (`int(t)`, arithmetic on a
shape outside torch) as a constant. A `Reshape`, `Expand`, `Slice`, `Resize` or
`ConstantOfShape` whose shape, starts, ends or sizes argument is such a constant (an
initializer or a `Constant` node, directly or through the `Concat` that assembles a shape) and
holds the export size of a declared dimension is the evidence when the model fails at another
length: the node by name and, from its scope (`/layer1/attn/Reshape`), the module and the file
and line of its class's forward.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnx_parity.locations import repo_relative, scrub_paths

if TYPE_CHECKING:  # onnx is imported when a model is read, not with this module
    from onnx import ModelProto, NodeProto

# The inputs of each operator that carry a shape, by position, and what ONNX calls them.
SHAPE_INPUTS: dict[str, tuple[tuple[int, str], ...]] = {
    "Reshape": ((1, "shape"),),
    "Expand": ((1, "shape"),),
    "Slice": ((1, "starts"), (2, "ends")),
    "Resize": ((3, "sizes"),),
    "ConstantOfShape": ((0, "input"),),
}
# A size below this is a channel count or a window as often as a length: never evidence.
MIN_SIZE = 3


@dataclass(frozen=True)
class ConstantShape:
    """One constant shape argument holding a declared dimension's export size."""

    node: str  # the ONNX node's name: "/layer1/attn/Reshape_1"
    op: str
    argument: str  # "shape", "starts", "ends", "sizes", "input"
    values: tuple[int, ...]
    dimension: str  # the configured name whose export size it holds
    size: int
    module: str | None = None  # the module path from the scope: "layer1.attn"
    module_class: str | None = None
    file: str | None = None  # the class's forward, when it is the user's code
    line: int | None = None
    origin: str | None = None  # the class's forward inside an installed package
    assembled: bool = False  # a Concat of run-time sizes and these constants feeds it

    def describe(self) -> str:
        """One line a finding quotes: the node, its constant, where it comes from."""
        where = f" in {self.module} ({self.module_class})" if self.module else ""
        place = (f", forward at {self.file}:{self.line}" if self.file else
                 f", forward in {self.origin} (an installed package)" if self.origin else "")
        takes = (f"a {self.argument} assembled from run-time sizes and the constant "
                 f"{list(self.values)}" if self.assembled else
                 f"the constant {self.argument} {list(self.values)}")
        return (f"{self.op} node {self.node}{where}{place} takes {takes}, which holds "
                f"{self.dimension}'s export size {self.size}")


def constant_shape_evidence(model: bytes | Path,
                            committed: Mapping[str, int]) -> tuple[ConstantShape, ...]:
    """Every constant shape argument that holds one of the `committed` sizes (dimension name
    -> its export size), in graph order."""
    import onnx

    proto = (onnx.load(str(model), load_external_data=False) if isinstance(model, Path)
             else onnx.load_from_string(model))
    constants = integer_constants(proto)
    assembled = {node.output[0] for node in proto.graph.node if node.op_type == "Concat"}
    found: list[ConstantShape] = []
    for node in proto.graph.node:
        for position, argument in SHAPE_INPUTS.get(node.op_type, ()):
            values = _values(node, position, constants)
            found += [ConstantShape(node.name, node.op_type, argument, values, name, size,
                                    assembled=node.input[position] in assembled)
                      for name, size in committed.items()
                      if size >= MIN_SIZE and size in values]
    return tuple(found)


def located(shapes: tuple[ConstantShape, ...], module: Any,
            repo: Path) -> tuple[ConstantShape, ...]:
    """Each constant with the module its node's scope names, and its class's forward."""
    return tuple(_located(shape, module, repo) for shape in shapes)


def _located(shape: ConstantShape, module: Any, repo: Path) -> ConstantShape:
    path, owner = _owner(shape.node, module)
    if owner is None:
        return shape
    cls = type(owner)
    try:
        source = inspect.getsourcefile(cls.forward) or ""
        line = inspect.getsourcelines(cls.forward)[1]
    except (OSError, TypeError):
        source, line = "", 0
    file = repo_relative(source, repo) if source else None
    origin = None if file or not source else scrub_paths(f"{source}:{line}", (repo,)) \
        .removeprefix("site-packages/").removeprefix("dist-packages/")
    return dataclasses.replace(shape, module=path or "the model", module_class=cls.__name__,
                               file=file, line=line if file else None, origin=origin)


def _owner(node: str, module: Any) -> tuple[str, Any]:
    """The submodule a TorchScript scope names: `/layer1/layer1.0/proj/MatMul` is
    `layer1.0.proj` (a scope is an attribute of the one before it, or a full path)."""
    path, owner = "", module
    for part in node.strip("/").split("/")[:-1]:
        for candidate in (f"{path}.{part}" if path else part, part):
            try:
                owner = module.get_submodule(candidate)
            except (AttributeError, TypeError):
                continue
            path = candidate
            break
        else:
            return path, owner if path else None
    return path, owner


def integer_constants(proto: ModelProto) -> dict[str, tuple[int, ...]]:
    """Integer tensors known before the model runs: initializers and Constant nodes."""
    from onnx import numpy_helper

    found = {tensor.name: _ints(numpy_helper.to_array(tensor))
             for tensor in proto.graph.initializer if tensor.data_type in (6, 7)}  # int32, 64
    for node in proto.graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.t.data_type in (6, 7):
                    found[node.output[0]] = _ints(numpy_helper.to_array(attribute.t))
    _concats(proto, found)
    return found


def _concats(proto: ModelProto, found: dict[str, tuple[int, ...]]) -> None:
    """A Concat assembling a shape from constants and run-time sizes: its constant parts
    (the sizes the tracer baked sit beside the ones it kept symbolic)."""
    for node in proto.graph.node:
        if node.op_type == "Concat":
            parts = [found[name] for name in node.input if name in found]
            if parts:
                found[node.output[0]] = tuple(value for part in parts for value in part)


def _values(node: NodeProto, position: int, constants: dict[str, tuple[int, ...]]
            ) -> tuple[int, ...]:
    if position >= len(node.input) or not node.input[position]:
        return ()
    return constants.get(node.input[position], ())


def _ints(array: Any) -> tuple[int, ...]:
    return tuple(int(value) for value in array.reshape(-1)[:64])
