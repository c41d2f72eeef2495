"""Where a measured command's time went: onnx-parity's from its progress lines and the per-model
steps of its report.json, the bare check's from its own phase lines.
"""

from __future__ import annotations

import json
import re
import statistics

from measure import Timed

PROGRESS = re.compile(r"^\[\s*([\d.]+)s\] (\S+): (.+)$")
BARE_IMPORTS = re.compile(r"^imports: ([\d.]+) s$")
BARE_MODEL = re.compile(r"^(\S+): max abs diff (\S+) at batch \d+ \(build\+export ([\d.]+) s, "
                        r"onnxruntime\+compare ([\d.]+) s\)$")
BARE_CHECKED = re.compile(r"^checked: ([\d.]+) s")


# ---------------------------------------------------------------- profiles


def parity_profile(run: Timed) -> dict[str, float]:
    """Where one `onnx-parity check` spent its time, from its progress lines and report.json."""
    events = [(float(m[1]), m[2], m[3]) for m in map(PROGRESS.match, run.stdout.splitlines()) if m]
    started = [t for t, _, step in events if step == "started"]
    finished = [t for t, _, step in events if step == "finished"]
    profile: dict[str, float] = {"wall": run.seconds}
    if started and finished:
        # The progress clock starts once the CLI has parsed its arguments and loaded settings.
        profile["check start to first worker (zygote imports, warm-up export)"] = min(started)
        profile["first worker started to last model finished"] = max(finished) - min(started)
        profile["rest (CLI start, report, zygote stop, exit)"] = run.seconds - max(finished)
    assert run.out_dir is not None
    report = json.loads((run.out_dir / "report.json").read_text(encoding="utf-8"))
    for model in report["models"]:
        for step in model.get("steps", []):
            profile[f"{model['name']}: {step['step']}"] = step["seconds"]
    return profile


def variants_profile(run: Timed) -> dict[str, float]:
    """What the deployment variants add to one model's check, from report.json's steps."""
    assert run.out_dir is not None
    report = json.loads((run.out_dir / "report.json").read_text(encoding="utf-8"))
    (model,) = report["models"]
    steps = {step["step"]: step["seconds"] for step in model["steps"]}
    variants = steps.pop("variants", 0.0)
    check = sum(steps.values())
    return {"fp32 check (load, build, export, verify)": check, "variants": variants,
            "ratio": variants / check if check else 0.0}


def variants_table(run: Timed) -> str:
    """The "Deployment variants" section of the run's report.md, up to the footer."""
    assert run.out_dir is not None
    text = (run.out_dir / "report.md").read_text(encoding="utf-8")
    start = text.find("#### Deployment variants")
    if start < 0:
        return ""
    return text[start:].split("\n<sub>")[0].strip()


def bare_profile(run: Timed) -> dict[str, float]:
    profile: dict[str, float] = {"wall": run.seconds}
    for line in run.stdout.splitlines():
        if match := BARE_IMPORTS.match(line):
            profile["imports (torch, onnxruntime, numpy)"] = float(match[1])
        elif match := BARE_MODEL.match(line):
            profile[f"{match[1]}: build + export"] = float(match[3])
            profile[f"{match[1]}: onnxruntime + compare"] = float(match[4])
        elif match := BARE_CHECKED.match(line):
            profile["interpreter start + exit (wall minus work)"] = run.seconds - float(match[1])
    return profile


def median_profile(profiles: list[dict[str, float]]) -> dict[str, float]:
    keys = dict.fromkeys(key for profile in profiles for key in profile)
    return {key: statistics.median(p[key] for p in profiles if key in p) for key in keys}


def phases(profile: dict[str, float]) -> dict[str, float]:
    """The run's phases without the per-model steps (whose keys read 'model: step')."""
    return {key: value for key, value in profile.items() if ": " not in key}
