"""The generation check's cost, on two Llamas built from configs (seeded random weights): one of
the tests' size (2 layers, width 64) and one of about 100M parameters (8 layers, width 768,
a 32,000-token vocabulary), each decoding 4 left-padded prompts for 16 steps. Both use LongRoPE
with `original_max_position_embeddings` at half their context, a position threshold the check
crosses with three decoding steps from a built past (docs/generation.md).

    python bench/generation.py [--repeat 3] [--case tiny] [--case 100m] [--json f.json]
    python bench/generation.py --case qwen-0.5b|qwen-1.5b|qwen-3b [--repeat 1]  # large cases
    python bench/run.py --generation ...    # the tiny and 100m cases inside the whole benchmark

For each case a temporary repository holds the model and two configurations: `generate = {
steps = 16 }` (one decoder-with-past export, step 0 at every batch size, then greedy decoding on
both sides), and the plain check of the same model and prompts as a user checks it without
`generate` (one forward pass without its cache, `use_cache = false`, batch and sequence axes
declared, the padding left out with `compare-mask`). Each repetition runs `onnx-parity check
--jobs 1` with both, in alternating order. Measured: each run's wall time and peak RSS (`os.wait4`,
as bench/large_model.py measures it) and the steps' seconds from report.json. Printed, per case:
  * the generation check (the `generate` step: step 0 and the decoding on both sides) against
    the model's own export-and-parity check (the plain run's export and verify steps): aim at
    most 1x, since the export dominates and a decoding step takes milliseconds;
  * peak memory of the generating run against the plain run: aim at most 1.3x;
  * the threshold steps (the `thresholds` step) against the generation check: aim at most 0.3x;
  * for information, the whole generating run against the whole plain run (its export of a
    step with the cache's inputs costs more than the plain export: more inputs, more dims).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from large_generation import SHAPES, measure_large_generation, page_rows, render
from large_model import measured, parity_command

AIMS = {"check": 1.0, "memory": 1.3, "thresholds": 0.3}
STEPS, PROMPTS = 16, 4


@dataclass(frozen=True)
class Case:
    label: str
    config: str  # LlamaConfig's keyword arguments, as Python source
    vocab: int
    length: int  # the prompts' (padded) length


# head_dim / 2 factors each; the threshold at `original` positions, half the context
LONGROPE = ('rope_parameters={{"rope_type": "longrope", "short_factor": [1.0] * {half}, '
            '"long_factor": [2.0] * {half}, "original_max_position_embeddings": {original}}}')
CASES = {
    "tiny": Case("Llama, 2 layers, width 64 (the tests' size)",
                 "vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, "
                 "num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, "
                 + LONGROPE.format(half=8, original=64), 256, 8),
    "100m": Case("Llama, 8 layers, width 768, vocabulary 32,000: 99.5M parameters",
                 "vocab_size=32000, hidden_size=768, intermediate_size=2048, "
                 "num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4, "
                 "max_position_embeddings=256, tie_word_embeddings=False, "
                 + LONGROPE.format(half=32, original=128), 32000, 16),
}
FACTORY = '''"""{label}, seeded."""

import torch


def build():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig({config})).eval()
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


def write_repo(repo: Path, case: Case = CASES["tiny"]) -> Path:
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "lm.py").write_text(
        FACTORY.format(label=case.label, config=case.config), encoding="utf-8")
    (repo / "samples").mkdir()
    ids = np.random.default_rng(0).integers(3, case.vocab, (PROMPTS, case.length))
    mask = np.ones_like(ids)
    mask[1, :2] = 0  # left-padded: rows 1 and 2 shorter
    mask[2, :3] = 0
    ids[mask == 0] = 0
    np.save(repo / "samples" / "input_ids.npy", ids.astype(np.int64))
    np.save(repo / "samples" / "attention_mask.npy", mask.astype(np.int64))
    for name, text in CONFIGS.items():
        (repo / f"{name}.toml").write_text("batch-sizes = [1, 4]\n" + text, encoding="utf-8")
    return repo


def measure_generation(repeat: int, cases: tuple[str, ...] = tuple(CASES)) -> dict[str, Any]:
    """Every case's figures, by case name; the large cases (bench/large_generation.py: a
    checkpoint folder of a Qwen2.5 model's shape, peak RSS against its weights) under
    `large`."""
    large = tuple(name for name in cases if name in SHAPES)
    return {"aims": AIMS, "steps": STEPS, "prompts": PROMPTS,
            "cases": {name: _measure_case(CASES[name], repeat)
                      for name in cases if name in CASES},
            **({"large": measure_large_generation(large, repeat)} if large else {})}


def _measure_case(case: Case, repeat: int) -> dict[str, Any]:
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in CONFIGS}
    steps: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-generation-") as folder:
        repo = write_repo(Path(folder) / "repo", case)
        for index in range(repeat):
            for name in (list(CONFIGS) if index % 2 == 0 else list(CONFIGS)[::-1]):
                out = Path(folder) / f"out-{name}-{index}"
                command = [*parity_command(out), "--config", str(repo / f"{name}.toml")]
                runs[name].append(measured(command, repo))
                steps[name].append(_steps(out))
    return _figures(case, runs, steps)


def _steps(out: Path) -> dict[str, float]:
    """The model's steps and their seconds, from report.json."""
    [model] = json.loads((out / "report.json").read_text(encoding="utf-8"))["models"]
    if not model["passed"]:
        raise RuntimeError(f"the benchmark's model failed its check: {model['findings']}")
    return {item["step"]: item["seconds"] for item in model["steps"]}


def _figures(case: Case, runs: dict[str, list[tuple[float, int]]],
             steps: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    found: dict[str, Any] = {"model": case.label}
    for name, values in runs.items():
        found[name] = {"label": LABELS[name], "seconds": [s for s, _ in values],
                       "max_rss_bytes": [m for _, m in values],
                       "median_seconds": statistics.median(s for s, _ in values),
                       "median_max_rss_bytes": statistics.median(m for _, m in values),
                       "median_steps": {step: statistics.median(run[step] for run in steps[name])
                                        for step in steps[name][0]}}
    generate = found["generation"]["median_steps"]["generate"]
    plain = found["plain"]["median_steps"]
    found["generate_seconds"] = generate
    found["export_and_parity_seconds"] = plain["export"] + plain["verify"]
    found["threshold_seconds"] = found["generation"]["median_steps"].get("thresholds", 0.0)
    found["ratios"] = {
        "check": generate / found["export_and_parity_seconds"],
        "thresholds": found["threshold_seconds"] / generate,
        "memory": (found["generation"]["median_max_rss_bytes"]
                   / found["plain"]["median_max_rss_bytes"]),
        "wall": found["generation"]["median_seconds"] / found["plain"]["median_seconds"]}
    return found


def render_generation(figures: dict[str, Any]) -> list[str]:
    lines: list[str] = render(figures["large"]) if figures.get("large") else []
    for case in figures["cases"].values():
        runs = len(case["plain"]["seconds"])
        lines.append(f"generation check ({case['model']}; {figures['prompts']} prompts, "
                     f"{figures['steps']} steps), median of {runs}:")
        for name in CONFIGS:
            series = case[name]
            shown = ", ".join(f"{step} {seconds:.2f} s"
                              for step, seconds in series["median_steps"].items())
            lines.append(f"  {series['label']}: {series['median_seconds']:.1f} s, "
                         f"{series['median_max_rss_bytes'] / 2**20:.0f} MiB peak RSS ({shown})")
        ratios = case["ratios"]
        lines += [
            f"  generation check {case['generate_seconds']:.2f} s / the model's own export and "
            f"parity check {case['export_and_parity_seconds']:.2f} s = {ratios['check']:.2f}x"
            f"{_aim('check', ratios['check'])}",
            f"  threshold steps {case['threshold_seconds']:.2f} s / the generation check "
            f"{case['generate_seconds']:.2f} s = {ratios['thresholds']:.2f}x"
            f"{_aim('thresholds', ratios['thresholds'])}",
            f"  peak memory generation / plain {ratios['memory']:.2f}x"
            f"{_aim('memory', ratios['memory'])}",
            f"  whole run generation / plain {ratios['wall']:.2f}x (for information)"]
    return lines


def _aim(key: str, ratio: float) -> str:
    return f" (aim <= {AIMS[key]:g}x)" + ("" if ratio <= AIMS[key] else "  OVER AIM")


def page_section(figures: dict[str, Any] | None) -> str:
    """docs/benchmarks.md's #generation section (bench/page.py); a run without it says so."""
    title = "## Generating models {#generation}\n\n"
    if not figures:
        return title + "Not measured in this run (`bench/run.py --generation`).\n"
    if not figures["cases"]:
        return title + page_rows(figures.get("large"))
    rows = ["| model | run | median | peak RSS (median) | generate / export + verify step |",
            "|---|---|---|---|---|"]
    verdicts = []
    for case in figures["cases"].values():
        for name in CONFIGS:
            series = case[name]
            step = (series["median_steps"]["generate"] if name == "generation"
                    else case["export_and_parity_seconds"])
            rows.append(f"| {case['model']} | {series['label']} | "
                        f"{series['median_seconds']:.1f} s | "
                        f"{series['median_max_rss_bytes'] / 2**20:.0f} MiB | {step:.2f} s |")
        ratios = case["ratios"]
        verdicts.append(
            f"- {case['model']}: the generation check is **{ratios['check']:.2f}x** the "
            f"model's own export and parity check (aim at most {AIMS['check']:g}x), its "
            f"threshold steps **{ratios['thresholds']:.2f}x** the generation check (aim at most "
            f"{AIMS['thresholds']:g}x); peak memory "
            f"**{ratios['memory']:.2f}x** the plain check's (aim at most {AIMS['memory']:g}x); "
            f"the whole run {ratios['wall']:.2f}x the plain run.")
    return (title + "`bench/generation.py`: `generate = { steps = "
            f"{figures['steps']} }}` on {figures['prompts']} left-padded prompts against the "
            "plain check of the same model (one forward pass without its cache, `compare-mask` "
            "on the padding), `--jobs 1`, alternating.\n\n" + "\n".join(rows) + "\n\n"
            + "\n".join(verdicts) + "\n\n" + page_rows(figures.get("large")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each command")
    parser.add_argument("--case", choices=sorted([*CASES, *SHAPES]), action="append",
                        default=None, help="measure only this case (repeatable; default: tiny "
                        "and 100m; the large ones, a Qwen2.5 shape's checkpoint folder built "
                        "once into .bench-cache/, only when named)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure_generation(args.repeat, tuple(args.case or CASES))
    print("\n".join(render_generation(figures)))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
