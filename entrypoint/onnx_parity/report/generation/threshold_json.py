"""The position thresholds of a generating model in report.json (`generation.thresholds`):
each config key and value, the past lengths its steps ran at with their max logit difference
and greedy-token agreement, how the past was built, or why no step ran."""

from __future__ import annotations

from typing import TypedDict

from onnx_parity.generation_results import ThresholdRun, ThresholdStep
from onnx_parity.report.json_figures import figure_from_json, figure_to_json


class ThresholdStepJson(TypedDict):  # generation_results.ThresholdStep
    past: int  # the past length; the step has past + 1 positions
    max_logit_diff: float | str  # "inf" where a side is NaN or infinite (json_values.py)
    tokens_agree: int  # rows whose greedy token agreed
    rows: int
    differing_rows: list[int]


class ThresholdJson(TypedDict):  # generation_results.ThresholdRun
    key: str  # the config key
    value: int
    layers: list[int]  # the layers it applies to; [] = every layer
    passed: bool
    steps: list[ThresholdStepJson]  # [] when not run
    built: str  # how the past was built
    skipped: str | None  # why no step ran


def thresholds_to_json(runs: tuple[ThresholdRun, ...]) -> list[ThresholdJson]:
    return [{"key": run.key, "value": run.value, "layers": list(run.layers),
             "passed": run.passed, "built": run.built, "skipped": run.skipped,
             "steps": [{"past": step.past, "max_logit_diff": figure_to_json(step.max_logit_diff),
                        "tokens_agree": step.tokens_agree, "rows": step.rows,
                        "differing_rows": list(step.differing_rows)} for step in run.steps]}
            for run in runs]


def thresholds_from_json(data: list[ThresholdJson]) -> tuple[ThresholdRun, ...]:
    return tuple(ThresholdRun(
        key=run["key"], value=run["value"], layers=tuple(run["layers"]),
        steps=tuple(ThresholdStep(step["past"], figure_from_json(step["max_logit_diff"]),
                                  step["tokens_agree"],
                                  step["rows"], tuple(step["differing_rows"]))
                    for step in run["steps"]),
        built=run["built"], skipped=run["skipped"]) for run in data)
