"""The zygote as the pool sees it: its process, its pipes, its death."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from onnx_parity.isolation.processes import describe_exit, kill_group, kill_pid
from onnx_parity.isolation.protocol import LineBuffer, Message, encode

# A zygote that has not finished its preload by then is considered hung.
ZYGOTE_READY_TIMEOUT_SECONDS = 300.0


class ZygoteProcess:
    """The zygote's process and pipes: send commands, receive events, notice its death."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.pid = process.pid
        self.log = log
        self.began = time.monotonic()
        self.ready_seconds: float | None = None
        self.killed_reason: str | None = None
        self.live_children: set[int] = set()
        self._events = LineBuffer()
        self._eof = False

    @classmethod
    def start(
        cls,
        job_function: str,
        workdir: Path,
        env: dict[str, str],
        warm_up: bool,
        preload: str | None,
        preimports: tuple[str, ...] = (),
    ) -> ZygoteProcess:
        log = workdir / "zygote.log"
        command = [
            sys.executable,
            "-m",
            "onnx_parity.isolation.zygote",
            "--job-function",
            job_function,
        ]
        command += ["--workdir", str(workdir)] + ([] if warm_up else ["--no-warm-up"])
        command += ["--preload", preload] if preload else []
        command += [part for entry in preimports for part in ("--preimport", entry)]
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=workdir,
                env=env,
                # A Ctrl-C aimed at the CLI reaches the pool, which stops us cleanly.
                process_group=0,
            )
        return cls(process, log)

    def send(self, command: Message) -> bool:
        """False when the zygote can no longer be reached (it died)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(encode(command))
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def events(self, timeout: float) -> list[Message]:
        """Events that arrived within `timeout`; the zygote's own `ready` is consumed here."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        if self._eof or not select.select([fd], [], [], timeout)[0]:
            if self._eof:
                time.sleep(timeout)
            return []
        data = os.read(fd, 65536)
        self._eof = not data
        events = self._events.feed(data)
        for event in events:
            if event.get("event") == "ready":
                self.ready_seconds = float(event["seconds"])
        return [event for event in events if event.get("event") != "ready"]

    def death(self) -> str | None:
        """Why the zygote is gone (None while it lives); kills it if it never became ready."""
        if (
            self.ready_seconds is None
            and time.monotonic() - self.began > ZYGOTE_READY_TIMEOUT_SECONDS
        ):
            self.killed_reason = (
                f"did not finish importing torch within {ZYGOTE_READY_TIMEOUT_SECONDS:g} s"
            )
            kill_pid(self.pid)
        status = self.process.poll()
        if status is None:
            return None
        how = self.killed_reason or describe_exit(status)
        return f"the worker zygote (pid {self.pid}) {how}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.send({"op": "stop"})
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_pid(self.pid)
                self.process.wait()
        for pid in self.live_children:
            kill_group(pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
