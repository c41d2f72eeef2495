"""Benchmark onnx-parity against the bare hand-written check, in the same run.

    python bench/run.py [--repeat 3] [--json results.json] [--page docs/benchmarks.md]
    python bench/run.py --from-json results.json --page docs/benchmarks.md   # no measuring

Measures whole commands (subprocess wall time, interpreter start and imports included):
  * `onnx-parity check --model small-cnn --model spectrum` (the example's passing models)
    against bench/bare_check.py on the same models, alternating which goes first;
  * `onnx-parity --help`;
  * all example models with `--jobs 1` against `--jobs 2`;
  * the example's failing model that gets localised (`spectral-head`), alone: the cost of
    finding its first diverging node against the model's own check time;
  * the example's CNN with its deployment variants (examples/seed-failures/variants.toml);
  * runs that scale (bench/scaling.py): four models and three tiny transformers models at
    `--jobs 1` and `--jobs 2` against the bare check, and the result cache's warm re-run.
Prints a plain-text table (median, min, runs; the ratio of medians) and where onnx-parity's
time went (from its progress lines and report.json), and writes the same as JSON and as the
docs' benchmark page (bench/page.py), the one home of every measured figure the docs quote.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from generation import measure_generation, render_generation
from large_model import measure_large, render_large
from measure import (
    ROOT,
    BenchError,
    Runner,
    Series,
    Timed,
    Workspace,
    alternate,
    bare_command,
    check_command,
    parity_executable,
    run_timed,
)
from page import render_page
from profiles import (
    bare_profile,
    median_profile,
    parity_profile,
    phases,
    variants_profile,
    variants_table,
)
from scaling import Scaling, measure_scaling, render_scaling
from sweep import measure_sweep_figures, render_sweep
from vision_language import measure_vision_language, render_vision_language

EXAMPLE = ROOT / "examples" / "seed-failures"
PASSING_MODELS = ("small-cnn", "spectrum")
# The example's CNN with its three deployment variants (int8-dynamic, int8-static, fp16).
VARIANTS_CONFIG = "variants.toml"
VARIANTS_AIM = 0.5
# Fails on purpose (parity-mismatch), so it is localised: what that costs.
FAILING_MODEL = "spectral-head"
LOCALISE_STEP = "localise"
OVERHEAD_AIM = 1.3
LOCALISATION_AIM = 1.0  # localising at most the model's own check time
HELP_AIM_SECONDS = 0.5
HELP_RUNS_AT_LEAST = 5


@dataclass(frozen=True)
class Figures:
    machine: dict[str, object]
    parity: Series
    serial: Series
    bare: Series
    help: Series
    jobs1: Series
    jobs2: Series
    parity_profile: dict[str, float]
    serial_profile: dict[str, float]
    bare_profile: dict[str, float]
    jobs1_profile: dict[str, float]
    jobs2_profile: dict[str, float]
    variants_profile: dict[str, float] = field(default_factory=dict)
    failing: Series | None = None
    failing_profile: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    repeat: int = 1
    variants_table: str = ""  # the comment's "Deployment variants" table of the last such run
    scaling: Scaling | None = None  # bench/scaling.py's runs that scale
    sweep: dict[str, Any] | None = None  # bench/sweep.py's figures (with --sweep)
    large: dict[str, Any] | None = None  # bench/large_model.py's figures (with --large)
    generation: dict[str, Any] | None = None  # bench/generation.py's (with --generation)
    vision_language: dict[str, Any] | None = None  # bench/vision_language.py's

    @property
    def localisation(self) -> tuple[float, float] | None:
        """(localise seconds, the model's own check seconds: every other step), medians."""
        prefix = f"{FAILING_MODEL}: "
        steps = {key.removeprefix(prefix): value for key, value in self.failing_profile.items()
                 if key.startswith(prefix)}
        if LOCALISE_STEP not in steps:
            return None
        check = sum(value for step, value in steps.items() if step != LOCALISE_STEP)
        return steps[LOCALISE_STEP], check

    @property
    def overhead_ratio(self) -> float:
        return self.parity.median / self.bare.median

    @property
    def overhead_ratio_of_mins(self) -> float:
        """Less sensitive to other work on the machine than the medians."""
        return self.parity.min / self.bare.min

    @property
    def serial_ratio(self) -> float:
        return self.serial.median / self.bare.median

    @property
    def speedup(self) -> float:
        return self.jobs1.median / self.jobs2.median

    def as_json(self) -> dict[str, object]:
        return {
            "machine": self.machine,
            "series": {name: getattr(self, name).as_json()
                       for name in ("parity", "serial", "bare", "help", "jobs1", "jobs2")},
            "overhead_ratio": self.overhead_ratio, "overhead_aim": OVERHEAD_AIM,
            "overhead_ratio_of_mins": self.overhead_ratio_of_mins,
            "overhead_ratio_jobs1": self.serial_ratio,
            "parallel_speedup": self.speedup, "help_aim_seconds": HELP_AIM_SECONDS,
            "parity_profile": self.parity_profile, "serial_profile": self.serial_profile,
            "bare_profile": self.bare_profile,
            "jobs1_profile": self.jobs1_profile, "jobs2_profile": self.jobs2_profile,
            "variants_profile": self.variants_profile, "variants_aim": VARIANTS_AIM,
            "failing": self.failing.as_json() if self.failing else None,
            "failing_profile": self.failing_profile,
            "localisation": (dict(zip(("localise_seconds", "check_seconds"), self.localisation,
                                      strict=True)) if self.localisation else None),
            "localisation_aim": LOCALISATION_AIM,
            "notes": self.notes, "repeat": self.repeat, "variants_table": self.variants_table,
            "scaling": self.scaling.as_json() if self.scaling is not None else None,
            "sweep": self.sweep,
            "large_model": self.large,
            "generation": self.generation,
            "vision_language": self.vision_language,
        }


# ---------------------------------------------------------------- the benchmark


def machine() -> dict[str, object]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(), "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(), "load_average_before": os.getloadavg(),
        "engine": engine_revision(), "versions": library_versions(),
    }


def library_versions() -> dict[str, str]:
    """What was measured with, read from the installed metadata (nothing imported)."""
    found: dict[str, str] = {}
    for name in ("torch", "onnx", "onnxruntime", "onnxscript"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def engine_revision() -> str:
    """The commit measured, and whether the package's working tree differed from it."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "entrypoint")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head}{' + uncommitted changes in entrypoint/' if dirty else ''}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def measure(repo: Path, repeat: int) -> Figures:
    workspace = Workspace()
    try:
        return _measure(repo, repeat, workspace)
    finally:
        workspace.remove()


def _all_models(repo: Path, jobs: int, out: Path | None) -> list[str]:
    return check_command(repo, out, (), jobs)


def _variants_command(repo: Path, out: Path | None) -> list[str]:
    return [*check_command(repo, out, (), None), "--config", str(repo / VARIANTS_CONFIG)]


def _measure(repo: Path, repeat: int, workspace: Workspace) -> Figures:
    found = machine()
    parity = Runner(lambda out: check_command(repo, out, PASSING_MODELS, None), (0,), workspace)
    serial = Runner(lambda out: check_command(repo, out, PASSING_MODELS, 1), (0,), workspace)
    bare = Runner(lambda _: bare_command(repo, PASSING_MODELS), (0,))
    parity_runs, serial_runs, bare_runs = alternate((parity, serial, bare), repeat)
    help_command = [str(parity_executable()), "--help"]
    helps = [run_timed(help_command, (0,)) for _ in range(max(repeat, HELP_RUNS_AT_LEAST))]
    # Four of the six models fail on purpose: exit 1 is the expected verdict.
    jobs = [Runner(functools.partial(_all_models, repo, n), (0, 1), workspace) for n in (1, 2)]
    jobs1_runs, jobs2_runs = alternate(jobs, repeat)
    variants = Runner(functools.partial(_variants_command, repo), (0,), workspace)
    (variant_runs,) = alternate((variants,), repeat)
    failing = Runner(lambda out: check_command(repo, out, (FAILING_MODEL,), 1), (1,), workspace)
    failing_runs = [failing() for _ in range(repeat)]
    scaling = measure_scaling(repeat, workspace)
    found["load_average_after"] = os.getloadavg()
    return Figures(
        machine=found,
        parity=_series(f"onnx-parity check (2 models, default --jobs = {os.cpu_count()})",
                       parity.text, parity_runs),
        serial=_series("onnx-parity check (2 models, --jobs 1)", serial.text, serial_runs),
        bare=_series("bare check (same 2 models)", bare.text, bare_runs),
        help=_series("onnx-parity --help", " ".join(help_command), helps),
        jobs1=_series("all models, --jobs 1", jobs[0].text, jobs1_runs),
        jobs2=_series("all models, --jobs 2", jobs[1].text, jobs2_runs),
        failing=_series(f"failing model {FAILING_MODEL}, localised, --jobs 1", failing.text,
                        failing_runs),
        failing_profile=median_profile([parity_profile(run) for run in failing_runs]),
        parity_profile=median_profile([parity_profile(run) for run in parity_runs]),
        serial_profile=median_profile([parity_profile(run) for run in serial_runs]),
        bare_profile=median_profile([bare_profile(run) for run in bare_runs]),
        jobs1_profile=median_profile([parity_profile(run) for run in jobs1_runs]),
        jobs2_profile=median_profile([parity_profile(run) for run in jobs2_runs]),
        variants_profile=median_profile([variants_profile(run) for run in variant_runs]),
        notes=_notes(found),
        repeat=repeat,
        variants_table=variants_table(variant_runs[-1]),
        scaling=scaling,
    )


def _series(label: str, command: str, runs: list[Timed]) -> Series:
    return Series(label, command, tuple(run.seconds for run in runs))


def _notes(found: dict[str, Any]) -> list[str]:
    cores = found["cores"] or 1
    busiest = max(found["load_average_before"][0], found["load_average_after"][0])
    if busiest > 0.5 * cores:
        return [(f"the machine was busy (1-minute load up to {busiest:.2f} on {cores} cores): "
                "figures are noisy, re-run when it is idle")]
    return []


# ---------------------------------------------------------------- output


def render(figures: Figures) -> str:
    lines = [*_table(figures), *_verdicts(figures), "", *_profiles(figures)]
    lines += render_scaling(figures.scaling) if figures.scaling is not None else []
    if figures.sweep is not None:
        lines += render_sweep(figures.sweep)
    if figures.large is not None:
        lines += render_large(figures.large)
    if figures.generation is not None:
        lines += render_generation(figures.generation)
    if figures.vision_language is not None:
        lines += render_vision_language(figures.vision_language)
    return "\n".join([*lines, *(f"note: {note}" for note in figures.notes)]) + "\n"


def _table(figures: Figures) -> list[str]:
    rows = [("measurement", "median", "min", "runs")]
    for series in (figures.parity, figures.serial, figures.bare, figures.help, figures.jobs1,
                   figures.jobs2, *([figures.failing] if figures.failing else [])):
        rows.append((series.label, f"{series.median:.2f} s", f"{series.min:.2f} s",
                     str(len(series.seconds))))
    width = max(len(row[0]) for row in rows)
    machine = figures.machine
    return [(f"onnx-parity benchmark, {machine['date']}, {machine['cores']} cores, "
            f"{machine['processor']}, engine {machine['engine']}"),
            *(f"{row[0]:<{width}}  {row[1]:>9}  {row[2]:>9}  {row[3]:>4}" for row in rows)]


def _verdicts(figures: Figures) -> list[str]:
    over = "" if figures.overhead_ratio <= OVERHEAD_AIM else "  OVER AIM"
    return [
        (f"overhead ratio (onnx-parity / bare, medians): {figures.overhead_ratio:.2f}x "
        f"(aim <= {OVERHEAD_AIM}x){over}"),
        f"overhead ratio of the minimums: {figures.overhead_ratio_of_mins:.2f}x",
        f"same with onnx-parity at --jobs 1 (both sequential): {figures.serial_ratio:.2f}x",
        f"parallel speed-up (jobs 1 / jobs 2, medians): {figures.speedup:.2f}x",
        f"--help: {figures.help.median:.2f} s (aim < {HELP_AIM_SECONDS} s)",
        *_variants_verdict(figures.variants_profile),
        *_localisation_verdict(figures),
    ]


def _variants_verdict(profile: dict[str, float]) -> list[str]:
    if not profile:
        return []
    over = "" if profile["ratio"] < VARIANTS_AIM else "  OVER AIM"
    check = profile["fp32 check (load, build, export, verify)"]
    return [(f"deployment variants (int8-dynamic, int8-static, fp16) on small-cnn: "
             f"+{profile['variants']:.2f} s on a {check:.2f} s fp32 check "
             f"({profile['ratio']:.2f}x, aim < {VARIANTS_AIM}x){over}")]


def _localisation_verdict(figures: Figures) -> list[str]:
    if figures.localisation is None:
        return [f"localisation: {FAILING_MODEL} was not localised (no '{LOCALISE_STEP}' step)"]
    localise, check = figures.localisation
    ratio = localise / check if check else float("inf")
    over = "" if ratio <= LOCALISATION_AIM else "  OVER AIM"
    return [(f"localisation of {FAILING_MODEL}: {localise:.3f} s against its own check "
             f"{check:.2f} s (load, build, export, verify): {ratio:.3f}x "
             f"(aim <= {LOCALISATION_AIM:g}x){over}")]


def _profiles(figures: Figures) -> list[str]:
    return [
        "where onnx-parity's time went (medians, seconds), default --jobs:",
        *_profile_lines(figures.parity_profile),
        "where onnx-parity's time went (medians, seconds), --jobs 1:",
        *_profile_lines(figures.serial_profile),
        "where the bare check's time went (medians, seconds):",
        *_profile_lines(figures.bare_profile),
        "all models (medians, seconds): --jobs 1, then --jobs 2:",
        *_profile_lines(phases(figures.jobs1_profile)),
        *_profile_lines(phases(figures.jobs2_profile)),
        f"the failing model {FAILING_MODEL} (medians, seconds):",
        *_profile_lines(figures.failing_profile),
    ]


def _profile_lines(profile: dict[str, float]) -> list[str]:
    width = max((len(key) for key in profile), default=0)
    return [f"  {key:<{width}}  {value:7.2f}" for key, value in profile.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each command")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--repo", type=Path, default=EXAMPLE,
                        help="repository to check (default: examples/seed-failures)")
    parser.add_argument("--page", type=Path, default=None,
                        help="also write the docs' benchmark page here (docs/benchmarks.md)")
    parser.add_argument("--from-json", type=Path, default=None, dest="from_json",
                        help="measure nothing: render --page from figures an earlier --json wrote")
    parser.add_argument("--large", action="store_true",
                        help="also the 2.4 GB model (bench/large_model.py; needs 6 GB, alone)")
    parser.add_argument("--sweep", action="store_true",
                        help="also the lengths sweep's cost (bench/sweep.py: eight architectures)")
    parser.add_argument("--generation", action="store_true",
                        help="also the generation check's cost (bench/generation.py: a tiny "
                             "and a 100M-parameter Llama)")
    parser.add_argument("--vision-language", action="store_true", dest="vision_language",
                        help="also a tiny VLM's whole check against its decoder's "
                             "(bench/vision_language.py)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.from_json is not None:
        if args.page is None:
            parser.error("--from-json only renders a page: give --page too")
        return write_page(json.loads(args.from_json.read_text(encoding="utf-8")), args.page)
    try:
        figures = measure(args.repo.resolve(), args.repeat)
        if args.sweep:
            figures = dataclasses.replace(figures, sweep=measure_sweep_figures(args.repeat))
        if args.large:
            figures = dataclasses.replace(figures, large=measure_large(args.repeat))
        if args.generation:
            figures = dataclasses.replace(figures, generation=measure_generation(args.repeat))
        if args.vision_language:
            figures = dataclasses.replace(
                figures, vision_language=measure_vision_language(args.repeat))
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures.as_json(), indent=2) + "\n", encoding="utf-8")
        print(f"figures: {args.json}")
    return write_page(figures.as_json(), args.page) if args.page is not None else 0


def write_page(figures: dict[str, Any], path: Path) -> int:
    path.write_text(render_page(figures), encoding="utf-8")
    print(f"page: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
