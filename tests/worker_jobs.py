"""Job functions for tests/test_workers.py, imported inside forked workers.

Every job has the pool's signature fn(payload, workdir, progress); `payload` is a dict.
WORKER_JOBS names the one dispatcher the pool imports; payload["job"] picks the behaviour, so
one pool (one zygote warm-up) serves every test.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORKER_JOBS = "worker_jobs:dispatch"
INJECTED_MODULE = "onnx_parity_test_injected_module"

Progress = Callable[[str], None]


def dispatch(payload: dict[str, Any], workdir: Path, progress: Progress) -> object:
    return JOBS[str(payload["job"])](payload, workdir, progress)


def echo(payload: dict[str, Any], _workdir: Path, progress: Progress) -> dict[str, object]:
    progress("echoing")
    print(f"echo job in pid {os.getpid()}")
    return {"value": payload.get("value"), "pid": os.getpid(), "memory": own_memory_kb()}


def segfault(_payload: dict[str, Any], _workdir: Path, _progress: Progress) -> None:
    print("about to read address 0")  # no flush: the worker's stdout must be line-buffered
    ctypes.string_at(0)


def abort(_payload: dict[str, Any], _workdir: Path, _progress: Progress) -> None:
    print("about to abort")
    os.abort()


def hang_forever(_payload: dict[str, Any], _workdir: Path, progress: Progress) -> None:
    progress("hanging")
    _descend(20)  # a deep stack, like a hang inside an exporter


def _descend(depth: int) -> None:
    if depth:
        _descend(depth - 1)
    _stuck_here()


def _stuck_here() -> None:
    while True:
        time.sleep(0.1)


def sleep(payload: dict[str, Any], _workdir: Path, progress: Progress) -> float:
    progress(f"pid {os.getpid()}")
    time.sleep(float(payload["seconds"]))
    return float(payload["seconds"])


def grow_memory(payload: dict[str, Any], _workdir: Path, _progress: Progress) -> int:
    import numpy

    megabytes = int(payload["mb"])
    block = numpy.ones(megabytes * 1024 * 1024, dtype=numpy.uint8)  # ones: every page touched
    time.sleep(0.3)  # hold it long enough for one poll of the resident set
    return int(block[::4096].sum())


def native_stderr(payload: dict[str, Any], _workdir: Path, _progress: Progress) -> str:
    """A raw fd-2 write, then a real onnxruntime kernel failure, which ORT logs natively."""
    import numpy
    import onnxruntime
    from onnx import TensorProto, helper

    os.write(2, f"{payload['marker']} from os.write\n".encode())
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])],
        "add",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n"]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["m"]),
        ],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    try:
        session.run(None, {"a": numpy.ones(3, numpy.float32), "b": numpy.ones(4, numpy.float32)})
    except Exception as error:  # the expected shape error; its native log line is what we test
        return str(error)
    return "no error"


def change_global_state(
    payload: dict[str, Any], workdir: Path, progress: Progress
) -> dict[str, object]:
    """Everything a careless model file might do to the process it runs in."""
    import torch

    torch.manual_seed(123)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    sys.modules[INJECTED_MODULE] = type(sys)(INJECTED_MODULE)
    sys.path.insert(0, str(workdir / "model-code"))
    setattr(torch, "relu", lambda tensor: tensor)  # noqa: B010 (what a vandal would do)
    return report_state(payload, workdir, progress)


def report_state(
    _payload: dict[str, Any], workdir: Path, _progress: Progress
) -> dict[str, object]:
    import torch

    # Large enough for ATen's OpenMP parallel_for and MKL's threads: a worker forked after the
    # zygote's warm-up must be able to start them (libgomp is not fork-safe once it has a pool).
    product = torch.ones(384, 384) @ torch.ones(384, 384)
    doubled = float((torch.ones(4_000_000) * 2).sum())
    return {
        "initial_seed": torch.initial_seed(),
        "num_threads": torch.get_num_threads(),
        "default_dtype": str(torch.get_default_dtype()),
        "injected_module": INJECTED_MODULE in sys.modules,
        "model_code_on_path": str(workdir / "model-code") in sys.path,
        "relu_is_torch": torch.relu(torch.tensor([-1.0])).item() == 0.0,
        "draw": torch.rand(3).tolist(),
        "matmul": float(product.sum()),
        "doubled": doubled,
        "seeded_draw": _seeded_draw(torch),
    }


def _seeded_draw(torch: Any) -> list[float]:
    torch.manual_seed(0)
    draw: list[float] = torch.rand(3).tolist()
    return draw


def raise_error(_payload: dict[str, Any], _workdir: Path, _progress: Progress) -> None:
    print("about to raise")
    raise ValueError("the model file has a typo")


def exit_without_result(_payload: dict[str, Any], _workdir: Path, _progress: Progress) -> None:
    os._exit(0)


def kill_zygote(payload: dict[str, Any], _workdir: Path, _progress: Progress) -> None:
    time.sleep(float(payload["after"]))
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(30)


def export_small_cnn(
    _payload: dict[str, Any], workdir: Path, progress: Progress
) -> dict[str, object]:
    """The real workload in miniature: dynamo export, then onnxruntime against torch."""
    import numpy
    import onnxruntime
    import torch

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    ).eval()
    sample = torch.randn(2, 3, 16, 16)
    began = time.monotonic()
    program = torch.onnx.export(
        model,
        (sample,),
        dynamo=True,
        verbose=False,
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )
    export_seconds = time.monotonic() - began
    progress("exported")
    path = workdir / "small_cnn.onnx"
    assert program is not None  # the dynamo exporter always returns its program
    program.save(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch = torch.randn(5, 3, 16, 16)
    (onnx_out,) = session.run(None, {session.get_inputs()[0].name: batch.numpy()})
    with torch.no_grad():
        torch_out = model(batch).numpy()
    return {
        "export_seconds": export_seconds,
        "max_abs_diff": float(numpy.abs(onnx_out - torch_out).max()),
        "memory": own_memory_kb(),
    }


def own_memory_kb() -> dict[str, int]:
    """VmRSS and VmSize of this process, to compare an RSS limit with an address-space limit."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmSize", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields


JOBS: dict[str, Callable[[dict[str, object], Path, Progress], object]] = {
    function.__name__: function
    for function in (
        echo,
        segfault,
        abort,
        hang_forever,
        sleep,
        grow_memory,
        native_stderr,
        change_global_state,
        report_state,
        raise_error,
        exit_without_result,
        kill_zygote,
        export_small_cnn,
    )
}
