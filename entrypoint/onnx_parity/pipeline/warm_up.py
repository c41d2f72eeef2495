"""The zygote's preload for model workers: torch and the ONNX stack imported and warmed once.

Passed to the worker pool as `onnx_parity.pipeline.warm_up:preload`; it runs in the zygote
before the first fork, so every model's worker starts with these imports and caches done.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

PRELOAD = "onnx_parity.pipeline.warm_up:preload"


def preload(warm_up: bool, preimports: Sequence[str] = ()) -> str:
    """Import the heavy libraries and export once, so every child inherits warm caches.

    `preimports` are the installed packages the configured factories import
    (pipeline/preimports.py), imported here too so each worker finds them loaded.
    """
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
        import torch
    except Exception as error:  # children will hit the same error and log it per model
        print(f"onnx-parity zygote: import failed: {error!r}", file=sys.stderr, flush=True)
        return f"failed: {error!r}"
    with _single_threaded(torch):  # what an import prints goes to the zygote's log
        _import_installed(preimports)
    if not warm_up:
        return "skipped"
    try:
        _cache_torchlib_catalogue()
    except Exception as error:  # an optimisation only: exports work without it
        print(f"onnx-parity zygote: torchlib cache skipped: {error!r}", file=sys.stderr, flush=True)
    try:
        with _output_to_devnull(), _single_threaded(torch):
            _export_tiny_model(torch)
    except Exception as error:
        print(f"onnx-parity zygote: warm-up export failed: {error!r}", file=sys.stderr, flush=True)
        return f"failed: {error!r}"
    return "done"


def _cache_torchlib_catalogue() -> None:
    """Parse torchlib's ~560 ONNX functions once per run instead of once per export.

    torch 2.13's dynamo exporter builds its operator registry on every export from
    onnxscript's get_torchlib_ops(), which re-parses each function's Python source (measured:
    1.4-2.6 s of every export, most of a small model's). The list depends only on the installed
    onnxscript, and the registry only reads it, so the zygote computes it once and every worker
    inherits it. The registry itself is still built fresh per export. If these internals move
    (another torch or onnxscript version), nothing is patched and exports are merely slower.
    """
    module = importlib.import_module("onnxscript._framework_apis.torch_2_11")
    original = getattr(module, "get_torchlib_ops", None)
    if not callable(original) or hasattr(original, "onnx_parity_cached"):
        return
    catalogue = tuple(original())

    def get_torchlib_ops() -> list[object]:
        return list(catalogue)

    setattr(get_torchlib_ops, "onnx_parity_cached", True)  # noqa: B010 (a marker, untyped)
    setattr(module, "get_torchlib_ops", get_torchlib_ops)  # noqa: B010 (onnxscript internals)


def _import_installed(preimports: Sequence[str]) -> None:
    """`module` or `module:name,name` (the names are read, which loads lazy packages' classes).

    Only installed packages are named here, never the repository's modules; a failure is left
    for the worker to meet again and report as the model's own load error.
    """
    for entry in preimports:
        module_name, _, names = entry.partition(":")
        began = time.perf_counter()
        try:
            module = importlib.import_module(module_name)
            for name in filter(None, names.split(",")):
                getattr(module, name, None)
        except (Exception, SystemExit) as error:  # an import may call sys.exit too
            _log(f"pre-import of {entry} failed: {error!r}")
            continue
        _log(f"pre-imported {entry} in {time.perf_counter() - began:.2f} s")


def _log(text: str) -> None:
    print(f"onnx-parity zygote: {text}", file=sys.stderr, flush=True)


def _export_tiny_model(torch: Any) -> None:
    model = torch.nn.Linear(4, 4)
    batch = torch.export.Dim("batch")
    torch.onnx.export(
        model,
        (torch.randn(2, 4),),
        dynamo=True,
        verbose=False,
        dynamic_shapes=({0: batch},),
    )


@contextmanager
def _single_threaded(torch: Any) -> Iterator[None]:
    """No OpenMP thread pool may exist when we fork: libgomp is not fork-safe, and a child
    forked after one parallel region hangs in its first (measured with torch 2.13). With one
    thread, a parallel region the warm-up might hit runs inline and starts no pool."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextmanager
def _output_to_devnull() -> Iterator[None]:
    """Silence fd 1 and 2 (Python and native writes alike) for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


