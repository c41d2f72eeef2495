"""The large-model case: a model past 2 GiB against an independent hand-written check of it.

    python bench/large_model.py [--repeat 1] [--json large.json]
    python bench/run.py --large ...    # the same case inside the whole benchmark

The model is nine 8192x8192 Linear layers (2.4 GB of float32), written as a factory into a
temporary repository and built at run time from a seed (nothing is committed). Measured, in
the same run, alternating which goes first:
  * `onnx-parity check --jobs 1` on it (batch sizes 1 and 2, no cache);
  * the bare check (`--bare-check REPO`, below): build, export with dynamo and external data,
    onnxruntime at batch 1 and 2, compare with PyTorch; nothing else.
Wall time of each whole command, and its peak memory: the largest max RSS among the command
and every process it waited for (`os.wait4`), so the worker of onnx-parity counts. Aims: at
most 1.3x the bare check for both. It needs about 6 GB free and must run alone in memory.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
WIDTH, LAYERS = 8192, 9
AIMS = {"wall": 1.3, "memory": 1.3}
FACTORY = f'''"""{LAYERS} Linear layers of {WIDTH}x{WIDTH}: 2.4 GB of float32, seeded."""

import math

import torch
from torch import nn


def build() -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    bound = math.sqrt(3.0 / {WIDTH})  # unit variance kept through every layer
    layers = []
    for _ in range({LAYERS}):
        layer = nn.Linear({WIDTH}, {WIDTH}, device="meta").to_empty(device="cpu")
        with torch.no_grad():
            layer.weight.uniform_(-bound, bound, generator=generator)
            layer.bias.zero_()
        layers.append(layer)
    return nn.Sequential(*layers).eval()
'''
CONFIG = """batch-sizes = [1, 2]
atol = 1e-4
rtol = 1e-4

[[model]]
name = "wide"
factory = "models.wide:build"
inputs = { input = "samples/input.npy" }
dynamic-axes = { input = { 0 = "batch" } }
"""


def write_repo(repo: Path) -> Path:
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "wide.py").write_text(FACTORY, encoding="utf-8")
    (repo / "samples").mkdir()
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "input.npy", rng.standard_normal((2, WIDTH)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    return repo


def measured(command: list[str], cwd: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes of the command and the processes it waited for)."""
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    stderr = process.stderr.read() if process.stderr else b""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - began
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} exited {process.returncode}: "
                           f"{stderr.decode(errors='replace')[-2000:]}")
    return seconds, usage.ru_maxrss * 1024  # Linux counts KiB


def parity_command(out: Path) -> list[str]:
    executable = Path(sys.executable).with_name("onnx-parity")
    return [str(executable), "check", "--jobs", "1", "--out", str(out)]


def measure_large(repeat: int) -> dict[str, Any]:
    runs: dict[str, list[tuple[float, int]]] = {"parity": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="bench-large-") as folder:
        repo = write_repo(Path(folder) / "repo")
        for index in range(repeat):
            order = ["parity", "bare"] if index % 2 == 0 else ["bare", "parity"]
            for name in order:
                command = (parity_command(Path(folder) / f"out-{index}") if name == "parity"
                           else [sys.executable, str(HERE), "--bare-check", str(repo)])
                runs[name].append(measured(command, repo))
    return _figures(runs)


def _figures(runs: dict[str, list[tuple[float, int]]]) -> dict[str, Any]:
    found: dict[str, Any] = {"aims": AIMS, "model": f"{LAYERS} x Linear({WIDTH}, {WIDTH})"}
    for name, values in runs.items():
        found[name] = {"seconds": [s for s, _ in values], "max_rss_bytes": [m for _, m in values],
                       "median_seconds": statistics.median(s for s, _ in values),
                       "median_max_rss_bytes": statistics.median(m for _, m in values)}
    found["ratios"] = {
        "wall": found["parity"]["median_seconds"] / found["bare"]["median_seconds"],
        "memory": found["parity"]["median_max_rss_bytes"] / found["bare"]["median_max_rss_bytes"]}
    return found


def render_large(figures: dict[str, Any]) -> list[str]:
    lines = [f"large model ({figures['model']}, 2.4 GB), median of "
             f"{len(figures['parity']['seconds'])}:"]
    for name in ("parity", "bare"):
        series = figures[name]
        lines.append(f"  {name:<7} {series['median_seconds']:7.1f} s  "
                     f"{series['median_max_rss_bytes'] / 2**30:5.2f} GiB peak RSS")
    for key, ratio in figures["ratios"].items():
        over = "" if ratio <= AIMS[key] else "  OVER AIM"
        lines.append(f"  {key} ratio {ratio:.2f}x (aim <= {AIMS[key]:g}x){over}")
    return lines


def page_section(figures: dict[str, Any] | None) -> str:
    """docs/benchmarks.md's section (bench/page.py); a run without --large says so."""
    title = "## A model past 2 GiB {#large-model}\n\n"
    if not figures:
        return title + "Not measured in this run (`bench/run.py --large`).\n"
    rows = ["| command | median | peak RSS (median) | runs |", "|---|---|---|---|"]
    for name, label in (("parity", "onnx-parity check --jobs 1"), ("bare", "bare check")):
        series = figures[name]
        rows.append(f"| {label} | {series['median_seconds']:.1f} s | "
                    f"{series['median_max_rss_bytes'] / 2**30:.2f} GiB | "
                    f"{len(series['seconds'])} |")
    ratios = figures["ratios"]
    return (title + f"`bench/large_model.py`: {figures['model']} (2.4 GB of float32, built at "
            "run time from a seed), exported with external data, against a hand-written check "
            "of the same model (dynamo export with external data, onnxruntime at batch 1 and "
            "2, compare) in the same run. Peak RSS is the largest max RSS of the command and "
            "the processes it waited for.\n\n" + "\n".join(rows) + "\n\n"
            f"Wall time {ratios['wall']:.2f}x (aim at most {AIMS['wall']:g}x), peak memory "
            f"{ratios['memory']:.2f}x (aim at most {AIMS['memory']:g}x).\n")


def bare_check(repo: Path) -> None:
    """The independent check: what a careful user would write by hand, and nothing more."""
    import onnxruntime
    import torch

    sys.path.insert(0, str(repo))
    model = importlib.import_module("models.wide").build()  # the repository's own factory
    samples = np.load(repo / "samples" / "input.npy")
    with tempfile.TemporaryDirectory(prefix="bare-large-") as folder:
        path = Path(folder) / "wide.onnx"
        program = torch.onnx.export(model, (torch.from_numpy(samples[:2]),), dynamo=True,
                                    input_names=["input"], verbose=False,
                                    dynamic_shapes=({0: torch.export.Dim("batch")},))
        assert program is not None
        program.save(str(path), external_data=True)
        del program
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        for size in (1, 2):
            batch = samples[:size]
            with torch.no_grad():
                expected = model(torch.from_numpy(batch)).numpy()
            got = session.run(None, {"input": batch})[0]
            print(f"batch {size}: max abs diff {float(np.max(np.abs(got - expected))):.3g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--bare-check", type=Path, default=None, dest="bare_check",
                        help="run the independent check on this repository (what is measured)")
    args = parser.parse_args(argv)
    if args.bare_check is not None:
        bare_check(args.bare_check)
        return 0
    figures = measure_large(args.repeat)
    print("\n".join(render_large(figures)))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
