"""Generating models (`generate`) in report.md, the PR comment and the console: one row per
model ("greedy tokens agree 16/16 steps, 4 rows; max logit diff 3.1e-5 at step 15") and the
logit drift along the steps, step 0 being the prompt pass."""

from __future__ import annotations

import math

from onnx_parity.generation_results import GenerationResult, PipelineChecks
from onnx_parity.report.generation.deployment_text import deployment_clause
from onnx_parity.report.generation.threshold_table import (
    full_prefix_clause,
    threshold_summary,
    threshold_table,
)
from onnx_parity.results import ModelResult, RunResult

STATUS = {True: "✅", False: "❌"}


def generation_summary(g: GenerationResult) -> str:
    """'greedy tokens agree 16/16 steps, 4 rows; max logit diff 3.1e-05 at step 15'."""
    worst = max(range(len(g.max_logit_diff)), key=lambda step: g.max_logit_diff[step],
                default=None)
    drift = ("" if worst is None
             else f"; max logit diff {g.max_logit_diff[worst]:.2g} at step {worst}")
    text = f"greedy tokens agree {g.agreed}/{g.steps} steps, {g.rows} rows{drift}"
    if g.pipeline is not None:  # a vision-language model: its three files first
        text = f"{pipeline_clause(g.pipeline)}: tokens agree {g.agreed}/{g.steps}, " + text[
            text.index("steps, ") + len("steps, "):]
    first = g.first_token_difference
    if first is not None:
        kind = "a near-tie" if first.near_tie else "a mismatch"
        text += (f"; first difference at step {first.step}, row {first.row} ({kind}: "
                 f"{first.pytorch_token} vs {first.onnx_token}, top-2 margin {first.margin:.2g})")
    if g.teacher_forced_from is not None:
        text += f"; teacher-forced from step {g.teacher_forced_from}"
    if g.whole_prefix:
        text += f"; each step re-ran the whole prefix ({g.whole_prefix_reason or 'no cache'})"
    if g.pipeline is not None and g.pipeline.derived:  # said where the user reads the verdict
        names = ", ".join(f"`{item.split(':', 1)[0]}`" for item in g.pipeline.derived)
        text += f"; {names} derived (not in the samples: report.json says how)"
    return (text + experts_clause(g) + threshold_summary(g) + full_prefix_clause(g)
            + deployment_clause(g))


def experts_clause(g: GenerationResult) -> str:
    """'; experts 32/32 routed (exported with batched_mm; PyTorch ran the user's grouped_mm)'."""
    if g.experts is None:
        return ""
    e = g.experts
    exported = (f"exported with {', '.join(e.exported)}" if e.exported
                else "exported by your export-command")
    return (f"; experts {e.routed}/{e.total} routed ({exported}; "
            f"PyTorch ran the user's {', '.join(e.pytorch)})")


def pipeline_clause(pipeline: PipelineChecks) -> str:
    """'vision 3 resolutions, embedding, decoder', each file that differs named with where."""
    count = pipeline.resolutions
    vision = f"vision {count} resolution{'s' if count != 1 else ''}"
    failed = [f"{check.file} differs at {check.case}" for check in pipeline.checks
              if not check.passed]
    return f"{vision}, embedding, decoder" + (f" ({'; '.join(failed)})" if failed else "")


def generation_section(run: RunResult) -> list[str]:
    """The generating models' rows and their drift per step; nothing when none generates."""
    models = [model for model in run.models if model.generation is not None]
    if not models:
        return []
    lines = ["#### Generation", "", "| | Model | Greedy decoding |", "|---|---|---|"]
    lines += [f"| {STATUS[model.passed]} | `{model.name}` | {generation_summary(_of(model))} |"
              for model in models]
    for model in models:
        lines += ["", *_drift_table(model), *threshold_table(model.name, _of(model))]
    return lines


def generation_lines(run: RunResult) -> list[str]:
    """The console's line for each generating model."""
    return [f"{model.name}: {generation_summary(_of(model))}" for model in run.models
            if model.generation is not None]


def _drift_table(model: ModelResult) -> list[str]:
    g = _of(model)
    steps = range(len(g.max_logit_diff))
    first = g.first_token_difference
    marks = {first.step: " ⚠️" if first.near_tie else " ❌"} if first is not None else {}
    return [f"<details><summary>`{model.name}`: max logit diff per step</summary>", "",
            "| Step | " + " | ".join(f"{step}{marks.get(step, '')}" for step in steps) + " |",
            "|---" * (len(g.max_logit_diff) + 1) + "|",
            "| Max logit diff | " + " | ".join(f"{value:.2g}" for value in g.max_logit_diff)
            + " |", "", *_steps_chart(model), "</details>"]


def _steps_chart(model: ModelResult) -> list[str]:
    """The drift along the steps as a Mermaid chart: log10 of each step's max logit diff (an
    exact step drawn at the axis' foot), the line log10(atol)."""
    values = _of(model).max_logit_diff
    logs = [math.log10(value) for value in values if 0 < value < math.inf]
    tolerance = math.log10(model.atol) if model.atol > 0 else None
    if len(values) < 2 or not logs:
        return []
    low = math.floor(min([*logs, *([tolerance] if tolerance is not None else [])])) - 1
    high = math.ceil(max([*logs, *([tolerance] if tolerance is not None else [])])) + 1
    heights = [f"{math.log10(value):.2f}" if 0 < value < math.inf
               else str(low if value == 0 else high) for value in values]
    lines = ["```mermaid", "xychart-beta", f'    title "{model.name}: drift along the steps"',
             '    x-axis "step (0: the prompt pass)" [' + ", ".join(
                 f'"{step}"' for step in range(len(values))) + "]",
             f'    y-axis "log10 max logit diff" {low} --> {high}',
             "    bar [" + ", ".join(heights) + "]"]
    if tolerance is not None:
        lines.append("    line [" + ", ".join([f"{tolerance:.2f}"] * len(values)) + "]")
    return [*lines, "```", ""]


def _of(model: ModelResult) -> GenerationResult:
    assert model.generation is not None
    return model.generation
