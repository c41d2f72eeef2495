"""The benchmark's cases for runs that scale (imported by bench/run.py, same run, same machine).

  * the four-model workload (bench/four-models.toml on examples/seed-failures' models) with
    `--jobs 1` and `--jobs 2` against the bare check (aims: at most 1.0x and 0.6x);
  * three tiny transformers models built from configs (bench/transformers-repo: BERT, GPT-2,
    ViT, seeded random weights) with `--jobs 1` and `--jobs 2` against the bare check (aim at
    most 1.0x with `--jobs 1`);
  * the result cache: the four-model run again with nothing changed, against the first run
    that filled the cache (aim at most 0.15x); then one model source edited, and which models
    ran again.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from measure import ROOT, Runner, Series, Timed, Workspace, alternate, bare_command, check_command

EXAMPLE = ROOT / "examples" / "seed-failures"
FOUR_MODELS_CONFIG = ROOT / "bench" / "four-models.toml"
FOUR_MODELS = ("small-cnn", "small-cnn-frozen", "spectrum", "spectrum-again")
TRANSFORMERS_REPO = ROOT / "bench" / "transformers-repo"
TRANSFORMERS_MODELS = ("bert", "gpt2", "vit")
AIMS = {"four_jobs1": 1.0, "four_jobs2": 0.6, "transformers_jobs1": 1.0, "warm_rerun": 0.15}
EDITED = "models/spectral.py"


@dataclass(frozen=True)
class Scaling:
    series: dict[str, Series]
    edited_ran: tuple[str, ...]
    edited_cached: tuple[str, ...]

    def ratio(self, name: str, against: str) -> float:
        return self.series[name].median / self.series[against].median

    @property
    def ratios(self) -> dict[str, float]:
        return {"four_jobs1": self.ratio("four_jobs1", "four_bare"),
                "four_jobs2": self.ratio("four_jobs2", "four_bare"),
                "transformers_jobs1": self.ratio("transformers_jobs1", "transformers_bare"),
                "transformers_jobs2": self.ratio("transformers_jobs2", "transformers_bare"),
                "warm_rerun": self.ratio("warm", "cold")}

    def as_json(self) -> dict[str, object]:
        return {"series": {name: s.as_json() for name, s in self.series.items()},
                "ratios": self.ratios, "aims": AIMS,
                "after_editing": {"file": EDITED, "ran": list(self.edited_ran),
                                  "cached": list(self.edited_cached)}}


def transformers_repo(workspace: Workspace) -> Path:
    """A copy of bench/transformers-repo with its samples written (seeded, nothing committed)."""
    repo = workspace.root / "transformers-repo"
    shutil.copytree(TRANSFORMERS_REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    rng = np.random.default_rng(0)
    (repo / "samples").mkdir()
    np.save(repo / "samples" / "input_ids.npy", rng.integers(0, 100, (2, 8)).astype(np.int64))
    np.save(repo / "samples" / "pixel_values.npy",
            rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    return repo


def four(jobs: int, workspace: Workspace, repo: Path = EXAMPLE,
         cache: Path | None = None) -> Runner:
    def build(out: Path | None) -> list[str]:
        command = [*check_command(repo, out, (), jobs), "--config", str(FOUR_MODELS_CONFIG)]
        return [*command, *(["--cache", str(cache)] if cache else [])]
    return Runner(build, (0, 1), workspace)  # small-cnn-frozen fails on purpose


def measure_scaling(repeat: int, workspace: Workspace) -> Scaling:
    runs: dict[str, list[Timed]] = {}
    bare_four = Runner(lambda _: [*bare_command(EXAMPLE, FOUR_MODELS), "--config",
                                  str(FOUR_MODELS_CONFIG)], (0, 1))
    four_runs = alternate((four(1, workspace), four(2, workspace), bare_four), repeat)
    runs.update(zip(("four_jobs1", "four_jobs2", "four_bare"), four_runs, strict=True))
    repo = transformers_repo(workspace)
    tf = [Runner(functools.partial(_check_all, repo, n), (0,), workspace) for n in (1, 2)]
    tf.append(Runner(lambda _: bare_command(repo, TRANSFORMERS_MODELS), (0,)))
    runs.update(zip(("transformers_jobs1", "transformers_jobs2", "transformers_bare"),
                    alternate(tf, repeat), strict=True))
    runs["cold"], runs["warm"] = [], []
    for index in range(repeat):  # a fresh cache each time: the cold run fills it
        cache = workspace.root / f"cache-{index}"
        runs["cold"].append(four(2, workspace, cache=cache)())
        runs["warm"].append(four(2, workspace, cache=cache)())
    ran, cached = _after_editing(workspace)
    series = {name: Series(_LABELS[name], "", tuple(t.seconds for t in timed))
              for name, timed in runs.items()}
    return Scaling(series, ran, cached)


def _check_all(repo: Path, jobs: int, out: Path | None) -> list[str]:
    return check_command(repo, out, (), jobs)


def _after_editing(workspace: Workspace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Fill a cache, edit one model's source, run again: which models ran, which were reused."""
    repo = workspace.root / "edited-example"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    cache = workspace.root / "cache-edited"
    four(2, workspace, repo, cache)()
    source = repo / EDITED
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    again = four(2, workspace, repo, cache)()
    ran = tuple(n for n in FOUR_MODELS if f"] {n}: started" in again.stdout)
    cached = tuple(n for n in FOUR_MODELS if f"] {n}: cached" in again.stdout)
    return ran, cached


_LABELS = {
    "four_jobs1": "4 models, --jobs 1", "four_jobs2": "4 models, --jobs 2",
    "four_bare": "bare check, same 4 models",
    "transformers_jobs1": "BERT+GPT-2+ViT, --jobs 1", "transformers_jobs2":
    "BERT+GPT-2+ViT, --jobs 2", "transformers_bare": "bare check, same 3 models",
    "cold": "4 models --cache, first run", "warm": "4 models --cache, nothing changed",
}


def render_scaling(scaling: Scaling) -> list[str]:
    rows = [(s.label, f"{s.median:.2f} s", f"{s.min:.2f} s", str(len(s.seconds)))
            for s in scaling.series.values()]
    width = max(len(row[0]) for row in rows)
    lines = ["", "runs that scale:",
             *(f"{a:<{width}}  {b:>9}  {c:>9}  {d:>4}" for a, b, c, d in rows)]
    names = {"four_jobs1": "4 models, --jobs 1 / bare", "four_jobs2": "4 models, --jobs 2 / bare",
             "transformers_jobs1": "transformers, --jobs 1 / bare",
             "transformers_jobs2": "transformers, --jobs 2 / bare",
             "warm_rerun": "cache, nothing changed / first run"}
    for key, ratio in scaling.ratios.items():
        aim = AIMS.get(key)
        verdict = "" if aim is None else f" (aim <= {aim}x){'  OVER AIM' if ratio > aim else ''}"
        lines.append(f"{names[key]} (medians): {ratio:.2f}x{verdict}")
    lines.append(f"after editing {EDITED}: ran {', '.join(scaling.edited_ran) or 'none'}; "
                 f"from the cache: {', '.join(scaling.edited_cached) or 'none'}")
    return lines
