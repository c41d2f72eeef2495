"""Running the benchmark's commands: each one a subprocess, timed whole, in rotating order.

What every case shares (bench/run.py, scaling.py, sweep.py): the command lines of
`onnx-parity check` and of the bare check, fresh output folders, and the wall times of one
command over the repetitions. A module of its own so that the cases import it, and run.py
imports the cases, one way.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE_CHECK = Path(__file__).resolve().parent / "bare_check.py"


class BenchError(Exception):
    """A measured command did not do what it should, so its time would mean nothing."""


@dataclass(frozen=True)
class Timed:
    seconds: float
    stdout: str
    out_dir: Path | None = None


@dataclass(frozen=True)
class Series:
    """Wall times of one command over the repetitions."""

    label: str
    command: str
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def min(self) -> float:
        return min(self.seconds)

    def as_json(self) -> dict[str, object]:
        return {"label": self.label, "command": self.command, "seconds": list(self.seconds),
                "median": self.median, "min": self.min}


# ---------------------------------------------------------------- running commands


def parity_executable() -> Path:
    path = Path(sys.executable).parent / "onnx-parity"
    if not path.exists():
        raise BenchError(f"{path} does not exist: onnx-parity is not installed in this "
                         f"interpreter's environment. Fix: `{sys.executable} -m pip install -e .`.")
    return path


def run_timed(command: Sequence[str], accept: tuple[int, ...],
              out_dir: Path | None = None) -> Timed:
    started = time.perf_counter()
    done = subprocess.run(list(command), check=False, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in accept:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise BenchError(f"`{' '.join(command)}` exited {done.returncode}, expected "
                         f"{' or '.join(map(str, accept))}; its output ends:\n{tail}")
    return Timed(seconds, done.stdout, out_dir)


def check_command(repo: Path, out: Path | None, models: Sequence[str],
                  jobs: int | None) -> list[str]:
    assert out is not None, "a check always runs with a fresh output folder"
    command = [str(parity_executable()), "check", "--repo", str(repo), "--out", str(out)]
    command += [part for name in models for part in ("--model", name)]
    return command + ([] if jobs is None else ["--jobs", str(jobs)])


def bare_command(repo: Path, models: Sequence[str]) -> list[str]:
    return [sys.executable, str(BARE_CHECK), "--repo", str(repo),
            *[part for name in models for part in ("--model", name)]]


class Workspace:
    """Fresh output folders for onnx-parity runs, all under one temporary folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="onnx-parity-bench-"))
        self.count = 0

    def fresh(self) -> Path:
        self.count += 1
        return self.root / f"out-{self.count}"

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True)
class Runner:
    """One command to time; `build` makes its argv, given a fresh output folder (or None)."""

    build: Callable[[Path | None], list[str]]
    accept: tuple[int, ...]
    workspace: Workspace | None = None

    @property
    def text(self) -> str:
        return " ".join(self.build(Path("OUT") if self.workspace else None))

    def __call__(self) -> Timed:
        out = self.workspace.fresh() if self.workspace else None
        return run_timed(self.build(out), self.accept, out)


def alternate(runners: Sequence[Runner], repeat: int) -> list[list[Timed]]:
    """Run each `repeat` times, rotating which goes first, so drift hits all of them alike."""
    runs: list[list[Timed]] = [[] for _ in runners]
    for index in range(repeat):
        shift = index % len(runners)
        for position in [*range(shift, len(runners)), *range(shift)]:
            runs[position].append(runners[position]())
    return runs
