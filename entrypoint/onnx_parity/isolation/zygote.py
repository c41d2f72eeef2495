"""The warm parent of every model worker: prepares once, then forks one child per job.

WorkerPool starts it as `python -m onnx_parity.isolation.zygote --job-function M:F --workdir
DIR [--preload M:F] [--no-warm-up] [--preimport MODULE ...]`. The preload (for onnx-parity:
importing torch, onnx, onnxruntime and onnxscript and warming up an export, see
pipeline/warm_up.py; the pre-imports are data it is handed) costs seconds
once; a child forked afterwards starts from that warm state in milliseconds, and because each
job gets a fresh copy of it, nothing one job does (seeds, thread counts, default dtype,
imported modules, monkeypatches) can reach the next one. This package knows nothing of torch.

The protocol is in isolation/protocol.py; the child's side in isolation/worker.py.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

from onnx_parity.isolation.processes import kill_group
from onnx_parity.isolation.protocol import LineBuffer, Message, send
from onnx_parity.isolation.worker import flush_stdio, import_function, run_worker


def _preload(preload: str | None, warm_up: bool, preimports: list[str]) -> str:
    """Run the pool's preload (`module:function(warm_up, preimports) -> status`), if any.

    `preimports` is data the pool was given (names of installed packages to import once);
    this side imports none of them itself.
    """
    if not preload:
        return "skipped"
    try:
        function = import_function(preload)
        return str(function(warm_up, preimports))
    except Exception as error:  # children will meet the same error and report it per job
        print(
            f"onnx-parity zygote: preload {preload} failed: {error!r}", file=sys.stderr, flush=True
        )
        return f"failed: {error!r}"


def _preimport(job_function: str) -> None:
    """Import the job's module once here (about 0.3 s) instead of once per forked worker.

    Only our own module is imported; the user's model code is imported after the fork.
    A failure is left for each worker to meet and report itself.
    """
    try:
        importlib.import_module(job_function.partition(":")[0])
    except Exception as error:
        print(
            f"onnx-parity zygote: pre-import of {job_function} failed: {error!r}",
            file=sys.stderr,
            flush=True,
        )


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

    def _handle(self, command: Message) -> bool:
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
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race
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


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m onnx_parity.isolation.zygote")
    parser.add_argument(
        "--job-function", required=True, help="module:callable, imported in each child"
    )
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--preload", default=None, help="module:function(warm_up) run once")
    parser.add_argument("--no-warm-up", action="store_true")
    parser.add_argument("--preimport", action="append", default=[],
                        help="handed to the preload: an installed module to import once")
    args = parser.parse_args(argv)
    # Keep the protocol on a private fd; stray prints (ours, torch's) go to stderr, the zygote log.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    began = time.monotonic()
    warm_up = _preload(args.preload, not args.no_warm_up, args.preimport)
    _preimport(args.job_function)
    send(protocol_fd, {"event": "ready", "seconds": time.monotonic() - began, "warm_up": warm_up})
    Zygote(args.job_function, args.workdir, protocol_fd).serve()
    flush_stdio()
    os._exit(0)  # skip interpreter teardown with torch loaded: it takes seconds and helps no one


if __name__ == "__main__":
    main()
