"""The benchmark runs end to end and reports its figures (no timing limits: machines are noisy).

Slow by nature: one repetition still runs the real onnx-parity and the bare check several times
(a few minutes on a 2-core machine, with the runs-that-scale cases of bench/scaling.py).
The same run writes the docs' benchmark page (--page), which --from-json renders again from
the figures alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generation import page_section  # bench/generation.py (bench/ is on the tests' path)

ROOT = Path(__file__).resolve().parent.parent
SERIES = ("parity", "serial", "bare", "help", "jobs1", "jobs2")
# The anchors other docs pages link to (docs/*.md -> benchmarks.md#...).
PAGE_ANCHORS = ("overhead", "help", "parallel", "localisation", "variants", "profile", "scaling",
                "cache", "generation", "vision-language", "reproduce")


@pytest.mark.slow
def test_benchmark_prints_and_writes_its_figures(tmp_path: Path) -> None:
    figures_path, page_path = tmp_path / "figures.json", tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--repeat", "1", "--json", str(figures_path),
         "--page", str(page_path)],
        check=False, capture_output=True, text=True, timeout=1500,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(figures_path.read_text(encoding="utf-8"))
    check_the_page(figures, page_path, tmp_path)
    for name in SERIES:
        series = figures["series"][name]
        assert series["seconds"]
        assert all(seconds > 0 for seconds in series["seconds"])
        assert series["label"] in done.stdout
    parity, bare = figures["series"]["parity"], figures["series"]["bare"]
    assert figures["overhead_ratio"] == parity["median"] / bare["median"]
    jobs1, jobs2 = figures["series"]["jobs1"], figures["series"]["jobs2"]
    assert figures["parallel_speedup"] == jobs1["median"] / jobs2["median"]
    assert f"{figures['overhead_ratio']:.2f}x" in done.stdout
    assert f"{figures['parallel_speedup']:.2f}x" in done.stdout
    # The profile comes from onnx-parity's own report: every step of both models is there.
    for model in ("small-cnn", "spectrum"):
        for step in ("load samples", "build model", "export", "verify"):
            assert f"{model}: {step}" in figures["parity_profile"]
        assert f"{model}: build + export" in figures["bare_profile"]
        assert f"{model}: localise" not in figures["parity_profile"]  # passing: nothing to pay
    # The failing case: its localisation measured against its own check, both printed.
    assert figures["failing"]["seconds"]
    assert "spectral-head: localise" in figures["failing_profile"]
    localisation = figures["localisation"]
    assert localisation["localise_seconds"] > 0
    assert localisation["check_seconds"] > 0
    ratio = localisation["localise_seconds"] / localisation["check_seconds"]
    assert f"localisation of spectral-head: {localisation['localise_seconds']:.3f} s" in done.stdout
    assert f"{ratio:.3f}x" in done.stdout
    # What the deployment variants add to the example CNN's check, as a ratio.
    variants = figures["variants_profile"]
    assert variants["variants"] > 0
    assert variants["fp32 check (load, build, export, verify)"] > 0
    assert f"({variants['ratio']:.2f}x, aim < 0.5x)" in done.stdout
    # Runs that scale: every series measured, every ratio printed, and the edited model alone ran.
    scaling = figures["scaling"]
    for name in ("four_jobs1", "four_jobs2", "four_bare", "transformers_jobs1",
                 "transformers_jobs2", "transformers_bare", "cold", "warm"):
        assert scaling["series"][name]["seconds"], name
    for name, ratio in scaling["ratios"].items():
        assert f"{ratio:.2f}x" in done.stdout, name
    assert scaling["ratios"]["warm_rerun"] == (scaling["series"]["warm"]["median"]
                                               / scaling["series"]["cold"]["median"])
    assert scaling["after_editing"]["ran"] == ["spectrum", "spectrum-again"]
    assert scaling["after_editing"]["cached"] == ["small-cnn", "small-cnn-frozen"]


def check_the_page(figures: dict, page_path: Path, tmp_path: Path) -> None:
    """The page says when, on what and at which commit; has every anchor; is the figures'."""
    page = page_path.read_text(encoding="utf-8")
    machine = figures["machine"]
    for needle in (machine["date"], f"`{machine['engine']}`", f"{machine['cores']} cores",
                   f"**{figures['overhead_ratio']:.2f}x**", f"**{figures['parallel_speedup']:.2f}x**"):
        assert needle in page, needle
    for anchor in PAGE_ANCHORS:
        assert f"{{#{anchor}}}" in page, anchor
    again = tmp_path / "again.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--from-json", str(tmp_path / "figures.json"),
         "--page", str(again)], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert again.read_text(encoding="utf-8") == page


def test_the_committed_page_comes_from_the_benchmark() -> None:
    """docs/benchmarks.md is bench/run.py's page (its header), with a date and a commit."""
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert page.startswith("<!-- Generated by bench/run.py --page docs/benchmarks.md")
    assert "| measured | " in page
    assert "| engine commit | `" in page
    for anchor in PAGE_ANCHORS:
        assert f"{{#{anchor}}}" in page, anchor


@pytest.mark.slow
def test_bare_check_prints_a_difference_per_model() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bare_check.py"), "--repo",
         str(ROOT / "examples" / "seed-failures"), "--model", "spectrum"],
        check=False, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("spectrum:"))
    diff = float(line.split("max abs diff ")[1].split()[0])
    assert 0 <= diff <= 1e-5


@pytest.mark.slow
def test_the_generation_benchmark_measures_its_case(tmp_path: Path) -> None:
    """bench/generation.py on the tests' size: both runs pass (it raises otherwise), every
    figure is printed and written, and the page section renders from the same figures."""
    figures_path = tmp_path / "generation.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "generation.py"), "--repeat", "1", "--case", "tiny",
         "--json", str(figures_path)],
        check=False, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(figures_path.read_text(encoding="utf-8"))
    [case] = figures["cases"].values()
    assert set(case["generation"]["median_steps"]) >= {"export", "generate"}
    assert set(case["plain"]["median_steps"]) >= {"export", "verify"}
    ratios = case["ratios"]
    assert ratios["check"] == case["generate_seconds"] / case["export_and_parity_seconds"]
    for key in ("check", "memory", "wall"):
        assert f"{ratios[key]:.2f}x" in done.stdout, key
    section = page_section(figures)
    assert "{#generation}" in section
    assert f"**{ratios['check']:.2f}x**" in section


@pytest.mark.slow
def test_the_vision_language_benchmark_measures_both_runs(tmp_path: Path) -> None:
    """bench/vision_language.py: the tiny Qwen2-VL and its text model's shape both pass (it
    raises otherwise), the ratios are printed, and the page section renders from them."""
    from vision_language import page_section as vision_language_section

    figures_path = tmp_path / "vision_language.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "vision_language.py"), "--repeat", "1",
         "--json", str(figures_path)],
        check=False, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(figures_path.read_text(encoding="utf-8"))
    assert set(figures["vision-language"]["median_steps"]) >= {
        "export", "export vision and embedding", "vision and embedding", "generate"}
    assert "export vision and embedding" not in figures["decoder"]["median_steps"]
    ratios = figures["ratios"]
    assert ratios["wall"] == (figures["vision-language"]["median_seconds"]
                              / figures["decoder"]["median_seconds"])
    for key in ("wall", "model", "memory"):
        assert f"{ratios[key]:.2f}x" in done.stdout, key
    section = vision_language_section(figures)
    assert "{#vision-language}" in section
    assert f"**{ratios['wall']:.2f}x**" in section


def test_the_large_generating_case_writes_what_save_pretrained_writes(tmp_path: Path) -> None:
    """bench/large_generation.py writes its checkpoint shard by shard (a 3B folder never held
    in memory): on a tiny shape, transformers loads it with no weight missing, the head tied
    to the embedding, the parameters the shape counts, and the initialisation's statistics."""
    from transformers import Qwen2ForCausalLM

    from large_generation import Shape, write_checkpoint

    shape = Shape("tiny", hidden=32, intermediate=64, layers=3, heads=4, kv_heads=2, vocab=96)
    write_checkpoint(shape, tmp_path / "qwen")
    loaded: Any = Qwen2ForCausalLM.from_pretrained(
        str(tmp_path / "qwen"), local_files_only=True, use_safetensors=True,
        output_loading_info=True)
    model, info = loaded
    assert not info["missing_keys"]
    assert not info["unexpected_keys"]
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert sum(p.numel() for p in model.parameters()) == shape.parameters()
    assert model.config.num_hidden_layers == 3
    weight = model.model.layers[2].mlp.down_proj.weight
    assert abs(float(weight.detach().std()) - 0.02) < 0.002
    norm = model.model.norm.weight.detach()
    assert float(norm.min()) == float(norm.max()) == 1.0
