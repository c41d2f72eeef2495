"""A repro folder's record in report.json (`models[].repro`): what it holds and reproduces."""

from __future__ import annotations

import dataclasses
from typing import cast

from onnx_parity.generation_results import StepRepro
from onnx_parity.report.json_figures import number_from_json as _number
from onnx_parity.report.json_shapes import ReproJson, StepReproJson
from onnx_parity.report.json_values import encode
from onnx_parity.results import ModelResult, Repro


def repro_to_json(model: ModelResult) -> ReproJson | None:
    """Repro's fields in order, its folder as the output folder names it (no machine path)."""
    if model.repro is None:
        return None
    named = dataclasses.replace(model.repro, folder=f"{model.name}.repro")
    return cast(ReproJson, encode(named))


def repro_from_json(data: ReproJson | None) -> Repro | None:
    if not data:
        return None
    return Repro(
        value=data["value"], op=data["op"], file=data["file"], line=data["line"],
        found_by=data["found_by"], reference=data["reference"],
        optimization=data["optimization"], batch_size=data["batch_size"],
        samples=data["samples"], inputs=tuple(data["inputs"]), outputs=tuple(data["outputs"]),
        nodes=data["nodes"], atol=data["atol"], rtol=data["rtol"],
        max_abs_diff=_number(data["max_abs_diff"]), reproduces=data["reproduces"],
        size_bytes=data["size_bytes"], limit_bytes=data["limit_bytes"],
        lines=tuple(data["lines"]), platform=data["platform"], omitted=data["omitted"],
        step=_step_from_json(data.get("step")),
    )  # no folder: the one it names is in the output folder, not a worker's


def _step_from_json(data: StepReproJson | None) -> StepRepro | None:
    if not data:
        return None
    return StepRepro(
        step=data["step"], past_length=data["past_length"], model=data["model"],
        optimization=data["optimization"], batch_size=data["batch_size"],
        rows=tuple(data["rows"]), inputs=tuple(data["inputs"]), outputs=tuple(data["outputs"]),
        max_abs_diff=_number(data["max_abs_diff"]), reproduces=data["reproduces"],
        size_bytes=data["size_bytes"], omitted=data["omitted"])
