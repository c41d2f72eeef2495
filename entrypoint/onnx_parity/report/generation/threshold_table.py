"""A generating model's position thresholds in report.md, the PR comment and the console: the
config key and value, the past lengths its steps ran at, each one's max logit difference and
greedy-token agreement (generation_table.py shows them under the Generation table)."""

from __future__ import annotations

from onnx_parity.generation_results import GenerationResult, ThresholdRun

STATUS = {True: "✅", False: "❌"}


def threshold_summary(g: GenerationResult) -> str:
    """'; thresholds: sliding_window = 4 crossed ✅' (nothing when the config names none)."""
    if not g.thresholds:
        return ""
    said = [f"{run.key} = {run.value} " + (STATUS[run.passed] if not run.skipped
                                           else "not crossed (past the context)")
            for run in g.thresholds]
    return "; thresholds: " + ", ".join(said)


def threshold_table(name: str, g: GenerationResult) -> list[str]:
    """One row per threshold: its steps' past lengths with their figures."""
    if not g.thresholds:
        return []
    lines = [f"<details><summary>`{name}`: position thresholds crossed</summary>", "",
             "| | Config key | Value | Layers | Past lengths run: max logit diff, tokens "
             "agree |", "|---|---|---|---|---|"]
    lines += [_row(run) for run in g.thresholds]
    built = next((run.built for run in g.thresholds if run.built), "")
    return [*lines, "", *([f"The past: {built}.", ""] if built else []), "</details>"]


def _row(run: ThresholdRun) -> str:
    layers = ", ".join(map(str, run.layers)) if run.layers else "all"
    steps = "; ".join(f"past {step.past}: {step.max_logit_diff:.2g}, {step.tokens_agree}/"
                      f"{step.rows}" for step in run.steps)
    status = "⏭️" if run.skipped else STATUS[run.passed]
    return (f"| {status} | `{run.key}` | {run.value} | {layers} | "
            f"{run.skipped or steps} |")
