"""Test harness around the fixture repository: copy it, write its files, run the real CLI on it.

Nothing binary is committed: tests copy tests/fixture_repo to a temporary folder and write the
samples and weights its configurations name there. `write_samples` needs numpy only;
`write_bad_files` also imports torch (for `.pt` files). `run_cli` runs
`python -m onnx_parity ...` as a real subprocess, exactly as a user or the action would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIXTURE_REPO = Path(__file__).resolve().parent


class Payload:
    """Unpickling this runs `touch MARKER`: what a hostile pull request would hide in a sample."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return os.system, (f"touch '{self.marker}'",)


def copy_repo(destination: Path) -> Path:
    shutil.copytree(FIXTURE_REPO, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def write_model_repo(root: Path, module: tuple[str, str], samples: dict[str, np.ndarray],
                     config: str) -> Path:
    """`root/repo`: `models/<name>.py` holding the `(name, source)` module (dedented), each
    sample as `samples/<name>.npy`, and onnx-parity.toml holding `config`."""
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    name, source = module
    (repo / "models" / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    for sample, array in samples.items():
        np.save(repo / "samples" / f"{sample}.npy", array)
    (repo / "onnx-parity.toml").write_text(config, encoding="utf-8")
    return repo


def left_padded_prompts(length: int = 6, vocab: int = 64) -> dict[str, np.ndarray]:
    """4 prompts of up to `length` tokens (ids from 3 up, below `vocab`), left-padded: rows 1
    and 2 shorter by 2 and 3; what the generating models' tests decode."""
    ids = np.random.default_rng(0).integers(3, vocab, (4, length)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    mask[2, :3] = 0
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def left_padded(rows: list[list[int]]) -> dict[str, np.ndarray]:
    """Prompts of different lengths as one batch: left-padded to the longest with id 0 and
    attention_mask 0 (the layout a processor with left padding returns)."""
    length = max(len(row) for row in rows)
    ids = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for index, row in enumerate(rows):
        ids[index, length - len(row):] = row
        mask[index, length - len(row):] = 1
    return {"input_ids": ids, "attention_mask": mask}


def write_samples(repo: Path) -> None:
    """The samples every configuration of the fixture repository names (seeded, numpy only)."""
    rng = np.random.default_rng(0)
    samples = repo / "samples"
    samples.mkdir(exist_ok=True)
    np.save(samples / "x.npy", rng.standard_normal((4, 12)).astype(np.float32))
    np.save(samples / "positive.npy", rng.uniform(1, 2, (4, 12)).astype(np.float32))
    mixed = np.concatenate([rng.uniform(1, 2, (2, 12)), rng.uniform(-3, -2, (2, 12))])
    np.save(samples / "mixed.npy", mixed.astype(np.float32))
    np.save(samples / "ids.npy", rng.integers(0, 50, (4, 6)).astype(np.int64))
    np.save(samples / "mask.npy", (rng.random((4, 6)) > 0.3).astype(np.int64))
    np.save(samples / "scale.npy", rng.uniform(0.5, 2, (4, 1)).astype(np.float32))
    # A time series (samples, time, features) for the models of a declared sequence axis.
    np.save(samples / "series.npy", rng.standard_normal((4, 8, 6)).astype(np.float32))


def write_bad_files(repo: Path, markers: Path) -> None:
    """Every broken sample and weights file of configs/bad-inputs.toml; payloads touch files in
    `markers` if anything ever unpickles them."""
    write_samples(repo)
    samples = repo / "samples"
    rng = np.random.default_rng(1)
    whole = (samples / "x.npy").read_bytes()
    (samples / "truncated.npy").write_bytes(whole[: len(whole) // 2])
    (samples / "empty.npy").write_bytes(b"")
    objects = np.empty(1, dtype=object)
    objects[0] = Payload(markers / "objects-npy-ran")
    np.save(samples / "objects.npy", objects, allow_pickle=True)
    np.save(samples / "wrong-shape.npy", rng.standard_normal((4, 7)).astype(np.float32))
    np.save(samples / "wrong-dtype.npy", rng.integers(0, 9, (4, 12)).astype(np.int64))
    with_nan = rng.standard_normal((4, 12)).astype(np.float32)
    with_nan[1, 3], with_nan[2, 5] = np.nan, np.inf
    np.save(samples / "nan-inf.npy", with_nan)
    _write_torch_files(repo, markers)


def _write_torch_files(repo: Path, markers: Path) -> None:
    import torch

    torch.save(Payload(markers / "evil-pt-ran"), repo / "samples" / "evil.pt")
    weights = repo / "weights"
    weights.mkdir(exist_ok=True)
    torch.save({"fc.weight": torch.zeros(3, 12), "fc.bias": torch.zeros(3)}, weights / "linear.pt")
    torch.save(Payload(markers / "evil-weights-ran"), weights / "evil.pt")


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str
    seconds: float
    out: Path | None
    # The peak RSS of the CLI's own process tree (itself, its zygote and workers), from wait4:
    # unlike RUSAGE_CHILDREN of the test process it does not include what earlier tests started.
    tree_max_rss_bytes: int = 0

    @property
    def folder(self) -> Path:
        """The output folder (runs made with an `out`)."""
        assert self.out is not None
        return self.out

    def report(self) -> dict:
        assert self.out is not None
        return json.loads((self.out / "report.json").read_text(encoding="utf-8"))

    def models(self) -> dict[str, dict]:
        return {model["name"]: model for model in self.report()["models"]}


def run_cli(*args: str, cwd: Path, out: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600, python: tuple[str, ...] = ("-m", "onnx_parity")) -> CliRun:
    """`python -m onnx_parity ARGS [--out OUT]` in `cwd`; waits for it and keeps everything."""
    command = [sys.executable, *python, *args] + (["--out", str(out)] if out else [])
    began = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, cwd=cwd, env={**os.environ, **(env or {})},
                                   text=True, stdout=stdout, stderr=stderr)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            process.kill()

        killer = threading.Timer(timeout, expire)
        killer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            killer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        if expired.is_set():
            raise subprocess.TimeoutExpired(command, timeout)
        stdout.seek(0)
        stderr.seek(0)
        return CliRun(process.returncode, stdout.read(), stderr.read(),
                      time.perf_counter() - began, out, usage.ru_maxrss * 1024)


def line_of(path: Path, text: str) -> int:
    """The line of `path` holding `text`: where a finding must point, found in the source."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)
