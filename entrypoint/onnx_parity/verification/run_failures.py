"""PyTorch or onnxruntime could not run the model on the samples: the `runtime-error` finding,
and `runtime-unsupported` when onnxruntime's provider has no kernel for an operator at the
model's dtype (a bfloat16 model on the CPU provider)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from onnx_parity.findings import Finding
from onnx_parity.locations import error_location
from onnx_parity.models import ReferenceFailure
from onnx_parity.verification.runtime import RuntimeFailure


def reference_finding(error: ReferenceFailure, size: int, repo: Path) -> Finding:
    """PyTorch fails on the samples themselves: name the user's line and the likely fix."""
    file, line = error_location(error.cause, repo)
    where = f" at {file}:{line}" if file else ""
    return Finding(
        "runtime-error",
        f"PyTorch fails on the samples at batch {size}{where}: {error}",
        file=file, line=line, evidence=str(error),
        fix=("Make forward run on the samples (their shape and dtype, axis 0 = samples): "
             "`python -c` with the same tensors reproduces it."),
    )


def runtime_finding(what: str, error: RuntimeFailure) -> Finding:
    return Finding("runtime-error", f"{what}: {error.message}{native_line(error)}",
                   evidence="\n".join(error.native) or error.message)


def native_line(error: RuntimeFailure) -> str:
    """onnxruntime's last native log line, as it is quoted after a failure's message."""
    return f" (onnxruntime log: {error.native[-1]})" if error.native else ""


# onnxruntime's words at session creation for an operator its providers have no kernel for.
MISSING_KERNEL = re.compile(r"NOT_IMPLEMENTED : Could not find an implementation for "
                            r"(?P<operator>[\w.]+)\((?P<opset>\d+)\) node with name "
                            r"'(?P<node>[^']*)'")
# onnx's element type names -> the dtype names the configuration uses.
_DTYPE_NAMES = {"FLOAT": "float32", "DOUBLE": "float64"}


def load_failure_finding(error: RuntimeFailure, model: Path) -> Finding:
    """onnxruntime cannot create the session: a missing kernel is `runtime-unsupported`."""
    match = MISSING_KERNEL.search(error.message)
    if match is None:
        return runtime_finding("onnxruntime cannot load the model", error)
    operator, node = match["operator"], match["node"]
    dtype = node_dtype(model, node)
    at = f"at {dtype}" if dtype else "at the dtype of its inputs"
    return Finding(
        "runtime-unsupported",
        f"onnxruntime's CPU provider has no kernel for {operator} (opset {match['opset']}) {at} "
        f"(node `{node}`), so the model cannot run there{native_line(error)}",
        evidence="\n".join(error.native) or error.message, fix=_fix(dtype),
        details={"operator": operator, "dtype": dtype or "unknown", "node": node})


def _fix(dtype: str | None) -> str | None:
    """The catalogue's fix for a half-precision model; another dtype's is the provider's."""
    if dtype in ("bfloat16", "float16"):
        return None
    return (f"Check the model where onnxruntime's provider has a kernel for this operator at "
            f"{dtype or 'this dtype'}, or change the dtype forward gives it.")


def node_dtype(model: Path, node: str) -> str | None:
    """The element type of the named node's first typed input, read from the graph (dynamo
    records every value's type; TorchScript's may need onnx's shape inference)."""
    import onnx

    try:
        proto = onnx.load(str(model), load_external_data=False)
        types = _value_types(proto)
        found = next((n for n in proto.graph.node if n.name == node), None)
        if found is not None and not any(name in types for name in found.input):
            types = _value_types(onnx.shape_inference.infer_shapes(proto))
    except Exception:  # an unreadable file: the message still names the operator
        return None
    element = next((types[name] for name in found.input if name in types), None) if found else None
    if element is None:
        return None
    name = str(onnx.TensorProto.DataType.Name(element))
    return _DTYPE_NAMES.get(name, name.lower())


def _value_types(proto: Any) -> dict[str, int]:  # onnx.ModelProto
    graph = proto.graph
    values = [*graph.value_info, *graph.input, *graph.output]
    types = {value.name: value.type.tensor_type.elem_type for value in values
             if value.type.tensor_type.elem_type}
    types.update({tensor.name: tensor.data_type for tensor in graph.initializer})
    return types
