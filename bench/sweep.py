"""The lengths sweep's cost: eight real architectures checked with the default lengths, against
the same check with `axis-sizes` pinned to the two lengths earlier versions ran.

    python bench/sweep.py [--repeat 3]     # alone: prints the figures
    python bench/run.py --sweep ...        # with the rest of the benchmark (and its page)

bench/sweep-repo holds eight models with a declared sequence, time or image axis, built from
small configs with seeded random weights (transformers BERT with its mask, GPT-2, ViT, a
Whisper encoder, Wav2Vec2, Swin; a conv1d and a conv2d net); its samples are written here.
Each repetition runs `onnx-parity check --jobs 1` on a copy twice, in rotating order: once as
configured (L, L // 2, an odd length near 3L/4 and one near 5L/4, at the smallest and the
largest batch size), once with every declared axis pinned to `[L, max(2, L // 2)]`. One
export per model either way: only the runs differ. Printed: both medians and their ratio (aim
at most 1.5x), the verify step's share from each run's report.json, and which models fail
only with the default lengths.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from measure import ROOT, Runner, Series, Timed, Workspace, alternate, check_command

SWEEP_REPO = ROOT / "bench" / "sweep-repo"
AIM = 1.5
LABELS = {"default": "8 architectures, default lengths, --jobs 1",
          "pinned": "8 architectures, axis-sizes pinned to L and L // 2, --jobs 1"}


@dataclass(frozen=True)
class Sweep:
    series: dict[str, Series]
    verify: dict[str, float]  # median seconds of all models' verify steps, per configuration
    failing: dict[str, list[str]]  # the models that failed, per configuration (last run)
    models: list[str]
    # model -> dimension -> the lengths added to break an assumption (default run, last)
    far_side: dict[str, dict[str, list[int]]]

    @property
    def ratio(self) -> float:
        return self.series["default"].median / self.series["pinned"].median

    def as_json(self) -> dict[str, object]:
        return {"series": {name: s.as_json() for name, s in self.series.items()},
                "ratio": self.ratio, "aim": AIM, "verify_seconds": self.verify,
                "failing": self.failing, "models": self.models, "far_side": self.far_side}


def sweep_repo(workspace: Workspace) -> Path:
    """A copy of bench/sweep-repo with its samples (seeded) and the pinned configuration."""
    repo = workspace.root / "sweep-repo"
    shutil.copytree(SWEEP_REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    rng = np.random.default_rng(0)
    samples = repo / "samples"
    samples.mkdir()
    np.save(samples / "input_ids.npy", rng.integers(0, 100, (2, 16)).astype(np.int64))
    np.save(samples / "attention_mask.npy", (rng.random((2, 16)) > 0.2).astype(np.int64))
    np.save(samples / "pixel_values.npy", rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    np.save(samples / "images.npy", rng.standard_normal((2, 3, 64, 64)).astype(np.float32))
    np.save(samples / "input_features.npy", rng.standard_normal((2, 16, 64)).astype(np.float32))
    np.save(samples / "input_values.npy", rng.standard_normal((2, 800)).astype(np.float32))
    np.save(samples / "series.npy", rng.standard_normal((2, 8, 32)).astype(np.float32))
    (repo / "pinned.toml").write_text(pinned_config(repo), encoding="utf-8")
    return repo


def pinned_config(repo: Path) -> str:
    """onnx-parity.toml with each model's declared non-batch axes pinned to L and L // 2."""
    text = (repo / "onnx-parity.toml").read_text(encoding="utf-8")
    models = tomllib.loads(text)["model"]
    blocks = text.split("[[model]]")
    for index, model in enumerate(models, start=1):
        pins = []
        for name, axes in model["dynamic-axes"].items():
            committed = np.load(repo / model["inputs"][name], mmap_mode="r").shape
            sizes = {axis: sorted({committed[int(axis)], max(2, committed[int(axis)] // 2)},
                                  reverse=True) for axis in axes if axis != "0"}
            pins.append(f"{name} = {{ " + ", ".join(f"{axis} = {sizes[axis]}"
                                                    for axis in sizes) + " }")
        blocks[index] = blocks[index].rstrip("\n") + f"\naxis-sizes = {{ {', '.join(pins)} }}\n\n"
    return "[[model]]".join(blocks)


def measure_sweep_figures(repeat: int) -> dict[str, object]:
    """The sweep in a workspace of its own, as the JSON figures bench/run.py keeps."""
    workspace = Workspace()
    try:
        return measure_sweep(repeat, workspace).as_json()
    finally:
        workspace.remove()


def measure_sweep(repeat: int, workspace: Workspace) -> Sweep:
    repo = sweep_repo(workspace)
    runners = {"default": _runner(repo, None, workspace),
               "pinned": _runner(repo, repo / "pinned.toml", workspace)}
    runs = dict(zip(runners, alternate(list(runners.values()), repeat), strict=True))
    series = {name: Series(LABELS[name], runners[name].text, tuple(t.seconds for t in timed))
              for name, timed in runs.items()}
    verify = {name: statistics.median(_verify_seconds(t) for t in timed)
              for name, timed in runs.items()}
    failing = {name: _failing(timed[-1]) for name, timed in runs.items()}
    models = [m["name"] for m in tomllib.loads(
        (repo / "onnx-parity.toml").read_text(encoding="utf-8"))["model"]]
    return Sweep(series, verify, failing, models, _far_side(runs["default"][-1]))


def _runner(repo: Path, config: Path | None, workspace: Workspace) -> Runner:
    def build(out: Path | None) -> list[str]:
        command = check_command(repo, out, (), 1)
        return command + (["--config", str(config)] if config else [])

    return Runner(build, (0, 1), workspace)  # 1: a model the sweep catches fails, as it should


def _report(timed: Timed) -> dict:
    assert timed.out_dir is not None
    return json.loads((timed.out_dir / "report.json").read_text(encoding="utf-8"))


def _verify_seconds(timed: Timed) -> float:
    return sum(step["seconds"] for model in _report(timed)["models"]
               for step in model["steps"] if step["step"] == "verify")


def _far_side(timed: Timed) -> dict[str, dict[str, list[int]]]:
    found = {model["name"]: {name: lengths["far_side"]
                             for name, lengths in model["lengths"].items()
                             if lengths.get("far_side")}
             for model in _report(timed)["models"]}
    return {name: dims for name, dims in found.items() if dims}


def _failing(timed: Timed) -> list[str]:
    return [model["name"] for model in _report(timed)["models"] if not model["passed"]]


def render_sweep(figures: dict) -> list[str]:
    """The sweep's lines of the benchmark's printout, from its JSON figures."""
    series = figures["series"]
    lines = ["", "lengths sweep (bench/sweep.py):"]
    lines += [f"{s['label']}: median {s['median']:.2f} s, min {s['min']:.2f} s "
              f"({len(s['seconds'])} runs); verify steps {figures['verify_seconds'][name]:.2f} s"
              for name, s in series.items()]
    over = "  OVER AIM" if figures["ratio"] > figures["aim"] else ""
    lines.append(f"lengths sweep, default / pinned (medians): {figures['ratio']:.2f}x "
                 f"(aim <= {figures['aim']}x){over}")
    only = [m for m in figures["failing"]["default"] if m not in figures["failing"]["pinned"]]
    lines.append(f"failing only with the default lengths: {', '.join(only) or 'none'}")
    lines.append(f"far-side lengths (added to break what an export assumed): "
                 f"{far_side_text(figures.get('far_side', {}))}")
    return lines


def far_side_text(found: dict[str, dict[str, list[int]]]) -> str:
    """`swin: height 65, 66; width 65, 66` per model, or `none`."""
    return "; ".join(f"{model}: " + ", ".join(f"{dim} {' '.join(map(str, sizes))}"
                                               for dim, sizes in dims.items())
                     for model, dims in found.items()) or "none"


def page_section(figures: dict | None) -> str:
    """The benchmark page's #sweep section (bench/page.py)."""
    if figures is None:
        return ("## The lengths sweep {#sweep}\n\nNot measured in this run "
                "(`bench/run.py --sweep` measures it).\n")
    series = figures["series"]
    only = [m for m in figures["failing"]["default"] if m not in figures["failing"]["pinned"]]
    rows = "\n".join(f"| {s['label']} | {s['median']:.2f} s | {s['min']:.2f} s | "
                     f"{figures['verify_seconds'][name]:.2f} s |" for name, s in series.items())
    return (
        "## The lengths sweep {#sweep}\n\n"
        f"Eight architectures ({', '.join(figures['models'])}; `bench/sweep-repo`) checked with "
        "the default lengths of each declared axis, against the same check with `axis-sizes` "
        "pinned to the two lengths earlier versions ran.\n\n"
        "| run | median | min | verify steps (median) |\n|---|---|---|---|\n"
        f"{rows}\n\n"
        f"Default / pinned: **{figures['ratio']:.2f}x** (aim at most {figures['aim']}x). "
        f"Failing only with the default lengths: {', '.join(only) or 'none'}. "
        "Lengths added on the far side of what an export assumed (both runs add them): "
        f"{far_side_text(figures.get('far_side', {}))}.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each command")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure_sweep_figures(args.repeat)
    print("\n".join(render_sweep(figures)))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
