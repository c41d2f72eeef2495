"""The generation check's cost: a 2-layer Llama built from a config (seeded random weights)
decoding 4 left-padded prompts for 16 steps, against the same model's own plain check.

    python bench/generation.py [--repeat 3] [--json f.json]     # alone: prints the figures

A temporary repository holds the model and two configurations: `generate = { steps = 16 }`
(one decoder-with-past export, then greedy decoding on both sides), and the plain check of the
same model and prompts as a user checks it without `generate` (one forward pass without its
cache, `use_cache = false`, batch and sequence axes declared, the padding left out with
`compare-mask`). Each repetition runs `onnx-parity check --jobs 1` with both, in
alternating order. Printed: each one's median wall time and peak RSS (`os.wait4`, as
bench/large_model.py measures it), the `generate` step's median seconds from report.json, and
the ratios generation / plain (aims: at most 1x wall time, 1.3x peak memory: the export
dominates, a decoding step is a few milliseconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from large_model import measured, parity_command

AIMS = {"wall": 1.0, "memory": 1.3}
STEPS, PROMPTS, LENGTH = 16, 4, 8
FACTORY = '''"""A 2-layer Llama of width 64, seeded."""

import torch


def build():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)).eval()
'''
MODEL = """[[model]]
name = "llama"
factory = "models.lm:build"
inputs = { input_ids = "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }
"""
CONFIGS = {
    "generation": MODEL + f"generate = {{ steps = {STEPS} }}\n",
    "plain": MODEL + """forward-kwargs = { use_cache = false }
dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, attention_mask = { 0 = "batch", \
1 = "sequence" }, logits = { 0 = "batch", 1 = "sequence" } }
compare-mask = { logits = "attention_mask" }
""",
}
LABELS = {"generation": f"generate = {{ steps = {STEPS} }}, {PROMPTS} prompts",
          "plain": "plain check of the same model (one forward pass)"}


def write_repo(repo: Path) -> Path:
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "lm.py").write_text(FACTORY, encoding="utf-8")
    (repo / "samples").mkdir()
    ids = np.random.default_rng(0).integers(3, 256, (PROMPTS, LENGTH)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, :2] = 0  # left-padded: rows 1 and 2 shorter
    mask[2, :3] = 0
    ids[mask == 0] = 0
    np.save(repo / "samples" / "input_ids.npy", ids)
    np.save(repo / "samples" / "attention_mask.npy", mask)
    for name, text in CONFIGS.items():
        (repo / f"{name}.toml").write_text("batch-sizes = [1, 4]\n" + text, encoding="utf-8")
    return repo


def measure_generation(repeat: int) -> dict[str, Any]:
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in CONFIGS}
    steps: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-generation-") as folder:
        repo = write_repo(Path(folder) / "repo")
        for index in range(repeat):
            for name in (list(CONFIGS) if index % 2 == 0 else list(CONFIGS)[::-1]):
                out = Path(folder) / f"out-{name}-{index}"
                command = [*parity_command(out), "--config", str(repo / f"{name}.toml")]
                runs[name].append(measured(command, repo))
                steps[name].append(_step_seconds(out, "generate" if name == "generation"
                                                 else None))
    return _figures(runs, steps)


def _step_seconds(out: Path, step: str | None) -> float:
    """The named step's seconds in report.json (None: all the model's steps)."""
    [model] = json.loads((out / "report.json").read_text(encoding="utf-8"))["models"]
    if not model["passed"]:
        raise RuntimeError(f"the benchmark's model failed its check: {model['findings']}")
    return sum(item["seconds"] for item in model["steps"] if step in (None, item["step"]))


def _figures(runs: dict[str, list[tuple[float, int]]],
             steps: dict[str, list[float]]) -> dict[str, Any]:
    found: dict[str, Any] = {"aims": AIMS, "steps": STEPS, "prompts": PROMPTS,
                             "model": "Llama, 2 layers, width 64"}
    for name, values in runs.items():
        found[name] = {"label": LABELS[name], "seconds": [s for s, _ in values],
                       "max_rss_bytes": [m for _, m in values],
                       "median_seconds": statistics.median(s for s, _ in values),
                       "median_max_rss_bytes": statistics.median(m for _, m in values),
                       "median_step_seconds": statistics.median(steps[name])}
    found["ratios"] = {
        "wall": found["generation"]["median_seconds"] / found["plain"]["median_seconds"],
        "memory": (found["generation"]["median_max_rss_bytes"]
                   / found["plain"]["median_max_rss_bytes"])}
    return found


def render_generation(figures: dict[str, Any]) -> list[str]:
    lines = [f"generation check ({figures['model']}, {figures['prompts']} prompts, "
             f"{figures['steps']} steps), median of {len(figures['plain']['seconds'])}:"]
    for name in CONFIGS:
        series = figures[name]
        what = "generate step" if name == "generation" else "model steps"
        lines.append(f"  {series['label']}: {series['median_seconds']:.1f} s, "
                     f"{series['median_max_rss_bytes'] / 2**20:.0f} MiB peak RSS "
                     f"({what} {series['median_step_seconds']:.2f} s)")
    for key, ratio in figures["ratios"].items():
        over = "" if ratio <= AIMS[key] else "  OVER AIM"
        lines.append(f"  {key} ratio generation / plain {ratio:.2f}x "
                     f"(aim <= {AIMS[key]:g}x){over}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each command")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure_generation(args.repeat)
    print("\n".join(render_generation(figures)))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
