"""A venv of its own for optimum-onnx 0.1.0, which needs transformers < 4.58 (the lock has
transformers 5): built once from the registry with the exact versions of
tests/optimum.constraints (torch pinned, so pip takes the CPU wheel and never a CUDA build),
cached in `.ci-cache/optimum-venv/` at the repository root (gitignored) and rebuilt when the
constraints change. Without the registry the caller's test fails with pip's reason: a silent
skip would hide a drift.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = Path(__file__).resolve().parent / "optimum.constraints"
CACHE = ROOT / ".ci-cache" / "optimum-venv"
PACKAGES = ("optimum-onnx", "torch", "transformers", "onnxruntime")


class VenvUnavailable(Exception):
    """The venv could not be built; the text says why."""


def optimum_python(cache: Path = CACHE) -> Path:
    """The venv's python, built on first use; a venv of other constraints is built anew."""
    stamp = hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()
    python, marker = cache / "bin" / "python", cache / "constraints.sha256"
    if python.is_file() and marker.is_file() and marker.read_text() == stamp:
        return python
    shutil.rmtree(cache, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(cache)], "python -m venv")
    _run([str(python), "-m", "pip", "install", "--quiet", "-c", str(CONSTRAINTS), *PACKAGES],
         "pip install -c tests/optimum.constraints")
    marker.write_text(stamp)
    return python


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise VenvUnavailable(f"`{what}` failed (exit {done.returncode}): "
                              f"{(done.stderr or done.stdout).strip()[-800:]}. The optimum test "
                              "needs the package registry; check the network or pip's index.")
