"""The warm parent of every model worker: imports torch once, then forks one child per model.

WorkerPool starts it as `python -m onnx_parity.engine.zygote --job-function M:F --workdir DIR`.
Importing torch, onnx, onnxruntime and onnxscript and running one tiny dynamo export costs
several seconds; a child forked afterwards starts from that warm state in milliseconds, and
because each model gets a fresh copy of it, nothing one model does (seeds, thread counts,
default dtype, imported modules, monkeypatches) can reach the next one.

This module must not import torch at module level: the pool (which stays torch-free so the
CLI starts fast) imports the protocol helpers below.

Protocol, one JSON object per line. Every line is written with a single os.write of less than
4 KiB (PIPE_BUF), so lines from the zygote and from concurrent children never interleave.
  pool -> zygote (stdin):  {"op": "run", "key": K, "job": PATH}  |  {"op": "stop"}
  zygote and children -> pool (stdout):
    {"event": "ready", "seconds": S, "warm_up": "done" | "skipped" | "failed: ..."}
    {"event": "started", "key": K, "pid": P}              (the child's first line)
    {"event": "progress", "key": K, "step": STEP, "t": T}  (T: seconds since the child started)
    {"event": "exited", "key": K, "pid": P, "status": N}   (exit code, or -signal number)
    {"event": "fork-failed", "key": K, "error": TEXT}
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import importlib
import json
import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TextIO

# The worker's own handle on its log for faulthandler, which needs the file kept open.
_STACK_DUMPS: TextIO | None = None
# POSIX guarantees writes up to PIPE_BUF (4096 on Linux) to a pipe are atomic.
MAX_LINE_BYTES = 4000
_STEP_CHARS = 1000


@dataclass(frozen=True)
class JobReturn:
    """What a child leaves in `<key>.result.pickle`: the job's value, or why there is none."""

    value: object
    error: str | None = None


def log_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.log"


def result_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.result.pickle"


def job_path(workdir: Path, key: str) -> Path:
    return workdir / f"{key}.job.pickle"


def encode(message: dict[str, object]) -> bytes:
    """One protocol line; a long `step` is cut so the line stays atomic on the pipe."""
    step = message.get("step")
    if isinstance(step, str) and len(step) > _STEP_CHARS:
        message = {**message, "step": step[:_STEP_CHARS] + "..."}
    line = (json.dumps(message, ensure_ascii=True) + "\n").encode("ascii")
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"protocol line of {len(line)} bytes is over {MAX_LINE_BYTES}: {line[:200]!r}")
    return line


def send(fd: int, message: dict[str, object]) -> None:
    os.write(fd, encode(message))


class LineBuffer:
    """Reassembles JSON lines from pipe reads, which may split or join lines anywhere."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[dict[str, object]]:
        *complete, self._pending = (self._pending + data).split(b"\n")
        return [json.loads(line) for line in complete if line.strip()]


# ---------------------------------------------------------------- the zygote itself


def _preload(warm_up: bool) -> str:
    """Import the heavy libraries and export once, so every child inherits warm caches."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
        import torch
    except Exception as error:  # children will hit the same error and log it per model
        print(f"onnx-parity zygote: import failed: {error!r}", file=sys.stderr, flush=True)
        return f"failed: {error!r}"
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


def _preimport(job_function: str) -> None:
    """Import the job's module once here (about 0.3 s) instead of once per forked worker.

    Only our own module is imported; the user's model code is imported after the fork.
    A failure is left for each worker to meet and report itself.
    """
    try:
        importlib.import_module(job_function.partition(":")[0])
    except Exception as error:
        print(f"onnx-parity zygote: pre-import of {job_function} failed: {error!r}",
              file=sys.stderr, flush=True)


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

    get_torchlib_ops.onnx_parity_cached = True  # type: ignore[attr-defined]
    module.get_torchlib_ops = get_torchlib_ops  # type: ignore[attr-defined]


def _export_tiny_model(torch: object) -> None:
    model = torch.nn.Linear(4, 4)  # type: ignore[attr-defined]
    batch = torch.export.Dim("batch")  # type: ignore[attr-defined]
    torch.onnx.export(  # type: ignore[attr-defined]
        model,
        (torch.randn(2, 4),),  # type: ignore[attr-defined]
        dynamo=True,
        verbose=False,
        dynamic_shapes=({0: batch},),
    )


@contextmanager
def _single_threaded(torch: object) -> Iterator[None]:
    """No OpenMP thread pool may exist when we fork: libgomp is not fork-safe, and a child
    forked after one parallel region hangs in its first (measured with torch 2.13). With one
    thread, a parallel region the warm-up might hit runs inline and starts no pool."""
    threads = torch.get_num_threads()  # type: ignore[attr-defined]
    torch.set_num_threads(1)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        torch.set_num_threads(threads)  # type: ignore[attr-defined]


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


class Zygote:
    """Forks a child per `run` command, reaps children and reports how each one ended."""

    def __init__(self, job_function: str, workdir: Path, protocol_fd: int) -> None:
        self.job_function = job_function
        self.workdir = workdir
        self.protocol_fd = protocol_fd
        self.children: dict[int, str] = {}
        self.pid = os.getpid()
        self.wakeup_read, self.wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_read, False)
        os.set_blocking(self.wakeup_write, False)

    def serve(self) -> None:
        # A SIGCHLD writes a byte to the wakeup pipe, so select returns as soon as a child ends.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wakeup_write, warn_on_full_buffer=False)
        commands = LineBuffer()
        while True:
            readable = select.select([0, self.wakeup_read], [], [], 1.0)[0]
            if self.wakeup_read in readable:
                _drain(self.wakeup_read)
            self._reap()
            if 0 in readable:
                data = os.read(0, 65536)
                if not data or not all(self._handle(command) for command in commands.feed(data)):
                    break
        self._stop_children()

    def _handle(self, command: dict[str, object]) -> bool:
        """Act on one command; False means stop serving."""
        if command.get("op") == "run":
            self._fork(str(command["key"]), Path(str(command["job"])))
            return True
        return False

    def _fork(self, key: str, job_file: Path) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as error:  # e.g. EAGAIN at the process limit: that model fails, we go on
            send(self.protocol_fd, {"event": "fork-failed", "key": key, "error": str(error)[:500]})
            return
        if pid == 0:
            self._become_worker(key, job_file)
        try:
            os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race
        except OSError:
            pass
        self.children[pid] = key

    def _become_worker(self, key: str, job_file: Path) -> NoReturn:
        _die_with_parent(self.pid)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.wakeup_read)
        os.close(self.wakeup_write)
        run_worker(key, job_file, self.workdir, self.job_function, self.protocol_fd)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            key = self.children.pop(pid, None)
            if key is None:
                continue  # not one of ours (e.g. a helper process the warm-up started)
            kill_group(pid)  # grandchildren the model left behind
            code = os.waitstatus_to_exitcode(status)
            send(self.protocol_fd, {"event": "exited", "key": key, "pid": pid, "status": code})

    def _stop_children(self) -> None:
        for pid in list(self.children):
            kill_group(pid)
        for pid in list(self.children):
            os.waitpid(pid, 0)
        self.children.clear()


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this worker if the zygote dies, so no model outlives its run."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def kill_group(pid: int) -> None:
    """SIGKILL a worker's whole process group (by PID); gone already is fine."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- one model's worker


def run_worker(key: str, job_file: Path, workdir: Path, job_function: str, protocol_fd: int) -> NoReturn:
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
        _flush_stdio()
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
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # Stacks go to a private copy of the log's fd: model code (or our own export capture) may
    # point fd 2 elsewhere for a while, and a dump written there would be lost with the worker.
    global _STACK_DUMPS
    _STACK_DUMPS = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=_STACK_DUMPS, all_threads=True)
    # The pool sends SIGUSR1 before killing a model that timed out: the log then shows where it hung.
    faulthandler.register(signal.SIGUSR1, file=_STACK_DUMPS, all_threads=True)


def _progress_reporter(key: str, started: float, protocol_fd: int) -> Callable[[str], None]:
    def progress(step: str) -> None:
        try:
            event = {"event": "progress", "key": key, "step": str(step), "t": time.monotonic() - started}
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
        function = _import_function(job_function)
        return JobReturn(function(payload, workdir, progress))
    except BaseException as error:  # SystemExit and KeyboardInterrupt from model code too
        traceback.print_exc()
        return JobReturn(None, f"the job raised {type(error).__name__}: {error}")


def _import_function(spec: str) -> Callable[..., object]:
    module_name, _, name = spec.partition(":")
    return getattr(importlib.import_module(module_name), name)


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


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m onnx_parity.engine.zygote")
    parser.add_argument("--job-function", required=True, help="module:callable, imported in each child")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--no-warm-up", action="store_true")
    args = parser.parse_args(argv)
    # Keep the protocol on a private fd; stray prints (ours, torch's) go to stderr, the zygote log.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    began = time.monotonic()
    warm_up = _preload(not args.no_warm_up)
    _preimport(args.job_function)
    send(protocol_fd, {"event": "ready", "seconds": time.monotonic() - began, "warm_up": warm_up})
    Zygote(args.job_function, args.workdir, protocol_fd).serve()
    _flush_stdio()
    os._exit(0)  # skip interpreter teardown with torch loaded: it takes seconds and helps no one


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy: the JobReturn a child pickles must
    # be onnx_parity.engine.zygote.JobReturn for the pool to unpickle it.
    from onnx_parity.engine.zygote import main as zygote_main

    sys.exit(zygote_main())
