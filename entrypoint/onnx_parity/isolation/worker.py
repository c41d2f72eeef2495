"""One model's worker: the forked child runs the job with its output in the model's log.

fd 1 and 2 point at the log (native writes from onnxruntime or C++ land there too), stacks
are dumped there on a crash or when the pool sends SIGUSR1, and the job's return value is
pickled next to it (written, then renamed) for the pool to read.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import io
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TextIO

from onnx_parity.isolation.protocol import JobReturn, log_path, result_path, send

# The worker's own handle on its log for faulthandler, which needs the file kept open.
_STACK_DUMPS: TextIO | None = None


def run_worker(
    key: str, job_file: Path, workdir: Path, job_function: str, protocol_fd: int
) -> NoReturn:
    """The forked child: run the job with output in the model's log, leave the result, exit."""
    status = 1
    try:
        os.setpgid(0, 0)
        _redirect_output(log_path(workdir, key))
        started = time.monotonic()
        send(protocol_fd, {"event": "started", "key": key, "pid": os.getpid()})
        progress = _progress_reporter(key, started, protocol_fd)
        outcome = _call_job(job_function, job_file, workdir, progress)
        _write_outcome(result_path(workdir, key), outcome)
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        flush_stdio()
        os._exit(status)


def _redirect_output(log: Path) -> None:
    """fd 1 and 2 to the model's log, so native writes (onnxruntime, C++) land there too."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    # Line buffering: what a model printed just before a segfault is still in the log.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)
    # Stacks go to a private copy of the log's fd: model code (or our own export capture) may
    # point fd 2 elsewhere for a while, and a dump written there would be lost with the worker.
    global _STACK_DUMPS
    _STACK_DUMPS = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=_STACK_DUMPS, all_threads=True)
    # The pool sends SIGUSR1 before killing a model that timed out: the log shows where it hung.
    faulthandler.register(signal.SIGUSR1, file=_STACK_DUMPS, all_threads=True)


def _progress_reporter(key: str, started: float, protocol_fd: int) -> Callable[[str], None]:
    def progress(step: str) -> None:
        try:
            event = {
                "event": "progress",
                "key": key,
                "step": str(step),
                "t": time.monotonic() - started,
            }
            send(protocol_fd, event)
        except OSError:
            pass  # the pool is gone; the zygote will stop this worker

    return progress


def _call_job(
    job_function: str, job_file: Path, workdir: Path, progress: Callable[[str], None]
) -> JobReturn:
    try:
        with job_file.open("rb") as handle:
            payload = pickle.load(handle)
        function = import_function(job_function)
        return JobReturn(function(payload, workdir, progress))
    except BaseException as error:  # SystemExit and KeyboardInterrupt from model code too
        traceback.print_exc()
        return JobReturn(None, f"the job raised {type(error).__name__}: {error}")


def import_function(spec: str) -> Callable[..., object]:
    module_name, _, name = spec.partition(":")
    function: Callable[..., object] = getattr(importlib.import_module(module_name), name)
    return function


def _write_outcome(path: Path, outcome: JobReturn) -> None:
    """Write then rename, so a worker killed mid-write never leaves half a pickle."""
    partial = path.with_name(path.name + ".partial")
    try:
        data = pickle.dumps(outcome)
    except Exception as error:
        traceback.print_exc()
        data = pickle.dumps(JobReturn(None, f"the job's result could not be pickled: {error!r}"))
    partial.write_bytes(data)
    os.replace(partial, path)


def flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
