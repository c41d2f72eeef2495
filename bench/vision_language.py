"""A vision-language model's whole check against its decoder's generation check alone (issue 29:
aim at most 1.5x): a tiny Qwen2-VL (seeded random weights, no download) and a Qwen2ForCausalLM of
its text model's shape (the same width, layers, heads and vocabulary), each `generate = {
steps = 16 }` on the same 3 left-padded prompts, the VLM's holding a 1x4x4 image, a 1x6x6 one
and none (the tests' samples: tests/test_vision_language_bundle.py).

    python bench/vision_language.py [--repeat 3] [--json f.json]
    python bench/run.py --vision-language ...   # inside the whole benchmark

Each repetition runs `onnx-parity check --jobs 1` with both configurations, in alternating
order. Measured: each run's wall time and peak RSS (`os.wait4`, as bench/large_model.py
measures it) and the model's steps' seconds from report.json. The VLM's run exports three files
(the decoder fed inputs_embeds with 3-D positions, the vision file, the embedding file) and
checks the vision file at two resolutions and an unseen one and the embedding file with one, two
and no images before decoding; the text model's exports one. Printed: the whole run against the
whole run (aim at most 1.5x) and the model's steps against the model's steps (the process's
start, the same for both, left out).
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

AIM = 1.5
STEPS = 16
TEXT = ('vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, '
        'num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, '
        'eos_token_id=2, bos_token_id=1')
FACTORIES = f'''"""A tiny Qwen2-VL and a Qwen2 language model of its text model's shape, seeded."""

import torch


def qwen2_vl():
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    text = dict({TEXT}, rope_parameters={{"rope_type": "default", "rope_theta": 10000.0,
                                          "mrope_section": [2, 1, 1]}})
    vision = dict(depth=2, embed_dim=32, hidden_size=32, num_heads=4, mlp_ratio=2,
                  patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
    return Qwen2VLForConditionalGeneration(Qwen2VLConfig(
        text_config=text, vision_config=vision, image_token_id=120, video_token_id=121,
        vision_start_token_id=118, vision_end_token_id=119)).eval()


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config({TEXT})).eval()
'''
PROMPT = ('inputs = {{ input_ids = "samples/input_ids.npy", attention_mask = '
          '"samples/attention_mask.npy"{images} }}\n')
IMAGES = (', pixel_values = "samples/pixel_values.npy", image_grid_thw = '
          '"samples/image_grid_thw.npy"')
CONFIGS = {"vision-language": ("qwen2_vl", IMAGES), "decoder": ("qwen2", "")}
LABELS = {"vision-language": "tiny Qwen2-VL, its three files (2 resolutions + 1 unseen)",
          "decoder": "Qwen2ForCausalLM of its text model's shape, its decoder alone"}
GRIDS = ((1, 4, 4), (1, 6, 6))
WIDTH = 3 * 2 * 4 * 4  # a patch's values: channels x temporal patch x patch x patch


def samples() -> dict[str, np.ndarray]:
    """Row 0 holds the 1x4x4 image, row 1 the 1x6x6 one, row 2 text only; left-padded."""
    rows = [[5, 17, 118, *[120] * (int(np.prod(grid)) // 4), 119, 7, 9, 20] for grid in GRIDS]
    rows.append([10, 11, 12, 13, 14])
    length = max(len(row) for row in rows)
    ids = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for index, row in enumerate(rows):
        ids[index, length - len(row):] = row
        mask[index, length - len(row):] = 1
    patches = sum(int(np.prod(grid)) for grid in GRIDS)
    pixels = np.random.default_rng(0).standard_normal((patches, WIDTH)).astype(np.float32)
    return {"input_ids": ids, "attention_mask": mask, "pixel_values": pixels,
            "image_grid_thw": np.array(GRIDS, dtype=np.int64)}


def write_repo(repo: Path) -> Path:
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "vl.py").write_text(FACTORIES, encoding="utf-8")
    (repo / "samples").mkdir()
    for name, array in samples().items():
        np.save(repo / "samples" / f"{name}.npy", array)
    for name, (factory, images) in CONFIGS.items():
        text = (f'batch-sizes = [3]\n[[model]]\nname = "m"\nfactory = "models.vl:{factory}"\n'
                f"generate = {{ steps = {STEPS} }}\n" + PROMPT.format(images=images))
        (repo / f"{name}.toml").write_text(text, encoding="utf-8")
    return repo


def measure_vision_language(repeat: int) -> dict[str, Any]:
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in CONFIGS}
    steps: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-vl-") as folder:
        repo = write_repo(Path(folder) / "repo")
        for index in range(repeat):
            for name in (list(CONFIGS) if index % 2 == 0 else list(CONFIGS)[::-1]):
                out = Path(folder) / f"out-{name}-{index}"
                command = [*parity_command(out), "--config", str(repo / f"{name}.toml")]
                runs[name].append(measured(command, repo))
                steps[name].append(_steps(out))
    return _figures(runs, steps)


def _steps(out: Path) -> dict[str, float]:
    [model] = json.loads((out / "report.json").read_text(encoding="utf-8"))["models"]
    if not model["passed"]:
        raise RuntimeError(f"the benchmark's model failed its check: {model['findings']}")
    return {item["step"]: item["seconds"] for item in model["steps"]}


def _figures(runs: dict[str, list[tuple[float, int]]],
             steps: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    found: dict[str, Any] = {"aim": AIM, "steps": STEPS}
    for name, values in runs.items():
        found[name] = {"label": LABELS[name], "seconds": [s for s, _ in values],
                       "max_rss_bytes": [m for _, m in values],
                       "median_seconds": statistics.median(s for s, _ in values),
                       "median_max_rss_bytes": statistics.median(m for _, m in values),
                       "median_model_seconds": statistics.median(sum(run.values())
                                                                 for run in steps[name]),
                       "median_steps": {step: statistics.median(run[step] for run in steps[name])
                                        for step in steps[name][0]}}
    vl, decoder = found["vision-language"], found["decoder"]
    found["ratios"] = {"wall": vl["median_seconds"] / decoder["median_seconds"],
                       "model": vl["median_model_seconds"] / decoder["median_model_seconds"],
                       "memory": vl["median_max_rss_bytes"] / decoder["median_max_rss_bytes"]}
    return found


def render_vision_language(figures: dict[str, Any]) -> list[str]:
    runs = len(figures["decoder"]["seconds"])
    lines = [f"vision-language check (generate = {{ steps = {figures['steps']} }}, 3 prompts), "
             f"median of {runs}:"]
    for name in CONFIGS:
        series = figures[name]
        shown = ", ".join(f"{step} {seconds:.2f} s"
                          for step, seconds in series["median_steps"].items())
        lines.append(f"  {series['label']}: {series['median_seconds']:.1f} s, "
                     f"{series['median_max_rss_bytes'] / 2**20:.0f} MiB peak RSS ({shown})")
    ratios = figures["ratios"]
    over = "" if ratios["wall"] <= AIM else "  OVER AIM"
    lines += [f"  whole run vision-language / decoder {ratios['wall']:.2f}x (aim <= {AIM:g}x)"
              f"{over}",
              f"  the model's steps vision-language / decoder {ratios['model']:.2f}x",
              f"  peak memory vision-language / decoder {ratios['memory']:.2f}x"]
    return lines


def page_section(figures: dict[str, Any] | None) -> str:
    """docs/benchmarks.md's #vision-language section (bench/page.py); a run without it says so."""
    title = "## Vision-language models {#vision-language}\n\n"
    if not figures:
        return title + "Not measured in this run (`bench/run.py --vision-language`).\n"
    rows = ["| run | median | peak RSS (median) | the model's steps (median) |",
            "|---|---|---|---|"]
    for name in CONFIGS:
        series = figures[name]
        rows.append(f"| {series['label']} | {series['median_seconds']:.1f} s | "
                    f"{series['median_max_rss_bytes'] / 2**20:.0f} MiB | "
                    f"{series['median_model_seconds']:.1f} s |")
    ratios = figures["ratios"]
    return (title + "`bench/vision_language.py`: a tiny Qwen2-VL's whole check (`generate = { "
            f"steps = {figures['steps']} }}`, 3 left-padded prompts: a 1x4x4 image, a 1x6x6 "
            "one, none) against a Qwen2ForCausalLM of its text model's shape checked the same "
            "way on the same prompts, `--jobs 1`, alternating.\n\n" + "\n".join(rows)
            + f"\n\nThe whole run is **{ratios['wall']:.2f}x** the decoder's (aim at most "
            f"{AIM:g}x); the model's steps {ratios['model']:.2f}x; peak memory "
            f"{ratios['memory']:.2f}x.\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure_vision_language(args.repeat)
    print("\n".join(render_vision_language(figures)))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
