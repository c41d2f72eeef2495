"""Run the exported model in onnxruntime, keeping its native log lines as evidence."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import ml_dtypes
import numpy as np

from onnx_parity.ansi import strip_ansi
from onnx_parity.errors import ModelProblem
from onnx_parity.export import native_stderr
from onnx_parity.locations import shorten

T = TypeVar("T")
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
ONNX_BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16
WARNING_LEVEL = 2  # onnxruntime severities: 0 verbose, 1 info, 2 warning, 3 error
# The `runtime-optimization` names (settings/schema.py) as onnxruntime.GraphOptimizationLevel.
GRAPH_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


class RuntimeFailure(ModelProblem):
    """onnxruntime refused the model or failed on an input; carries its native log lines."""

    def __init__(self, message: str, native: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.native = native


@dataclass(frozen=True)
class Session:
    handle: Any  # onnxruntime.InferenceSession
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]


def open_session(model: Path, optimization: str = "all", threads: int = 0) -> Session:
    """A CPU session on the .onnx at `model` (onnxruntime reads its external data from the
    file beside it), at the graph optimization level named as in `runtime-optimization`;
    `threads` > 0 caps its pools (workers running side by side share the cores)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = WARNING_LEVEL
    options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel,
                                               GRAPH_LEVELS[optimization])
    if threads > 0:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    handle = _native_call(lambda: onnxruntime.InferenceSession(
        str(model), options, providers=["CPUExecutionProvider"]))
    return Session(
        handle,
        tuple(item.name for item in handle.get_inputs()),
        tuple(item.name for item in handle.get_outputs()),
    )


def run_session(session: Session, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    if _has_bfloat16(session, feed):
        return _native_call(lambda: _run_bfloat16(session.handle, feed))
    outputs = _native_call(lambda: session.handle.run(None, feed))
    return [np.asarray(value) for value in outputs]


def _has_bfloat16(session: Session, feed: dict[str, np.ndarray]) -> bool:
    return (any(array.dtype == BFLOAT16 for array in feed.values())
            or any(item.type == "tensor(bfloat16)" for item in session.handle.get_outputs()))


def _run_bfloat16(handle: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    """numpy has no bfloat16 onnxruntime knows: such inputs go in as OrtValues of element type
    BFLOAT16 and such outputs come out as their bytes, read as ml_dtypes' bfloat16."""
    import onnxruntime

    values = {name: (onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(
                         np.ascontiguousarray(array).view(np.uint16), ONNX_BFLOAT16)
                     if array.dtype == BFLOAT16
                     else onnxruntime.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array)))
              for name, array in feed.items()}
    return [_as_array(value) for value in handle.run_with_ort_values(None, values)]


def _as_array(value: Any) -> np.ndarray:
    if value.data_type() != "tensor(bfloat16)":
        return np.asarray(value.numpy())
    raw = (ctypes.c_char * value.tensor_size_in_bytes()).from_address(value.data_ptr())
    return np.frombuffer(bytes(raw), np.uint16).reshape(value.shape()).view(BFLOAT16)


def _native_call(call: Callable[[], T]) -> T:
    """Run an onnxruntime call with fd 2 captured; its failure carries the native lines."""
    with native_stderr() as native:
        try:
            result = call()
        except Exception as error:  # onnxruntime raises plain RuntimeError/Fail subclasses
            failure: Exception | None = error
        else:
            failure = None
    if failure is not None:
        raise _failure(failure, native)
    return result


def _failure(error: BaseException, native: list[str]) -> RuntimeFailure:
    """onnxruntime's native lines go to the model's log (the worker's stdout) and the finding."""
    for line in native:
        print(f"onnxruntime: {line}")
    return RuntimeFailure(_one_line(error), tuple(native))


def _one_line(error: BaseException, limit: int = 700) -> str:
    return shorten(strip_ansi(str(error)), limit)
