"""Read the exported model back: its opset, its inputs' and outputs' dims, the checker's word."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onnx_parity.ansi import strip_ansi
from onnx_parity.locations import shorten
from onnx_parity.model_files import ModelFile

if TYPE_CHECKING:  # onnx is imported when a model is inspected, not with this module
    from onnx import ModelProto, TensorShapeProto, ValueInfoProto

Dims = tuple[int | str | None, ...]


@dataclass(frozen=True)
class ModelFacts:
    opset: int | None
    inputs: dict[str, Dims]
    outputs: dict[str, Dims]
    checker_error: str | None
    operators: tuple[str, ...]


def inspect_model(model: ModelFile) -> ModelFacts:
    """The graph alone is read (never the weights of a model with external data); the checker
    is given the path, so it reads the data file itself and a model past 2 GiB is checked."""
    import onnx

    proto = onnx.load(str(model.path), load_external_data=False)
    return ModelFacts(
        opset=_default_opset(proto),
        inputs=_dims(proto.graph.input, _initializers(proto)),
        outputs=_dims(proto.graph.output, set()),
        checker_error=_check(proto if model.data_path is None else str(model.path)),
        operators=tuple(node.op_type for node in proto.graph.node),
    )


def _default_opset(proto: ModelProto) -> int | None:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return None


def _initializers(proto: ModelProto) -> set[str]:
    return {tensor.name for tensor in proto.graph.initializer}


def _dims(values: Iterable[ValueInfoProto], skip: set[str]) -> dict[str, Dims]:
    found: dict[str, Dims] = {}
    for value in values:
        if value.name in skip:
            continue
        shape = value.type.tensor_type.shape
        found[value.name] = tuple(_dim(dim) for dim in shape.dim)
    return found


def _dim(dim: TensorShapeProto.Dimension) -> int | str | None:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    if dim.HasField("dim_param"):
        return str(dim.dim_param)
    return None


def _check(model: ModelProto | str) -> str | None:
    """A model without external data is checked as read (it is all there); one with it by
    path, which the checker requires past 2 GiB."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # ValidationError, InferenceError: both are findings
        return shorten(strip_ansi(str(error)), 800)
    return None


def is_symbolic(dim: int | str | None) -> bool:
    return not isinstance(dim, int)
