"""Processes by PID: how one ended, how much memory it holds, and stopping it (never by name)."""

from __future__ import annotations

import os
import signal


def describe_exit(status: int) -> str:
    """`status` as subprocess reports it: an exit code, or minus the signal number."""
    if status >= 0:
        return f"exited with status {status}"
    number = -status
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    text = f"killed by signal {number} ({name})"
    if number == signal.SIGKILL:
        text += ", not sent by onnx-parity: most likely the kernel's out-of-memory killer"
    return text


def resident_set_mb(pid: int) -> float | None:
    """VmRSS of `pid` in MB (None if it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def signal_process(pid: int, signum: int, *, group: bool = False) -> None:
    """Send `signum` to the process `pid` (or its whole process group); gone already is fine."""
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(pid: int) -> None:
    """SIGKILL a worker's whole process group (by PID)."""
    signal_process(pid, signal.SIGKILL, group=True)


def kill_pid(pid: int) -> None:
    signal_process(pid, signal.SIGKILL)


def dump_stacks(pid: int) -> None:
    """faulthandler in the worker writes every thread's stack into its log on SIGUSR1."""
    signal_process(pid, signal.SIGUSR1)
