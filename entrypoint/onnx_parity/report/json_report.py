"""report.json: the machine-readable verdict, and its way back into a RunResult.

The `comment` command (two-job mode) re-renders the markdown from this file alone, so it
round-trips everything the markdown shows.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from onnx_parity import __version__
from onnx_parity.engine.results import (ExportAttempt, ModelResult, OutputComparison,
                                        RunResult, StepTiming)
from onnx_parity.findings import Finding

SCHEMA_VERSION = 1


class ReportFormatError(Exception):
    """A report.json that this version cannot read."""


def run_to_json(run: RunResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "tool": "onnx-parity",
        "tool_version": __version__,
        "versions": dict(run.versions),
        "config": run.config_path,
        "passed": run.passed,
        "failed_models": list(run.failed_models),
        "models": [model_to_json(model) for model in run.models],
    }


def model_to_json(model: ModelResult) -> dict[str, Any]:
    return {
        "name": model.name,
        "passed": model.passed,
        "exporter": model.exporter,
        "opset": model.opset,
        "requested_opset": model.requested_opset,
        "atol": model.atol,
        "rtol": model.rtol,
        "batch_sizes": list(model.batch_sizes),
        "max_abs_diff": number_to_json(model.max_abs_diff),
        "max_rel_diff": number_to_json(model.max_rel_diff),
        "findings": [finding.to_json() for finding in model.findings],
        "comparisons": [comparison_to_json(c) for c in model.comparisons],
        "attempts": [asdict(a) for a in model.attempts],
        "steps": [asdict(s) for s in model.steps],
        "onnx_sha256": model.onnx_sha256,
        "sample_sha256": dict(model.sample_sha256),
    }


def run_from_json(data: dict[str, Any]) -> RunResult:
    if not isinstance(data, dict) or data.get("tool") != "onnx-parity":
        raise ReportFormatError("this is not an onnx-parity report.json (no \"tool\" field). "
                                "Fix: pass the report.json written by `onnx-parity check`.")
    if data.get("schema") != SCHEMA_VERSION:
        raise ReportFormatError(f"report.json schema {data.get('schema')!r} is not "
                                f"{SCHEMA_VERSION}. Fix: use the same onnx-parity version in "
                                "both jobs.")
    try:
        models = tuple(_model_from_json(item) for item in data["models"])
        return RunResult(config_path=str(data["config"]), versions=dict(data["versions"]),
                         models=models)
    except (KeyError, TypeError, ValueError) as error:
        raise ReportFormatError(f"report.json is incomplete ({error}). Fix: pass the unmodified "
                                "report.json written by `onnx-parity check`.") from None


def _model_from_json(item: dict[str, Any]) -> ModelResult:
    return ModelResult(
        name=item["name"], exporter=item["exporter"], requested_opset=item["requested_opset"],
        opset=item["opset"], atol=item["atol"], rtol=item["rtol"],
        batch_sizes=tuple(item["batch_sizes"]),
        findings=tuple(Finding.from_json(f) for f in item["findings"]),
        comparisons=tuple(_comparison(c) for c in item.get("comparisons", [])),
        attempts=tuple(ExportAttempt(**a) for a in item.get("attempts", [])),
        steps=tuple(StepTiming(**s) for s in item.get("steps", [])),
        onnx_sha256=item.get("onnx_sha256"), sample_sha256=dict(item.get("sample_sha256", {})),
    )


def comparison_to_json(comparison: OutputComparison) -> dict[str, Any]:
    data = asdict(comparison)
    data["torch_shape"] = list(comparison.torch_shape)
    data["onnx_shape"] = list(comparison.onnx_shape)
    for key in NUMBERS:
        data[key] = number_to_json(data[key])
    return data


def _comparison(data: dict[str, Any]) -> OutputComparison:
    fields = dict(data)
    fields["torch_shape"] = tuple(fields["torch_shape"])
    fields["onnx_shape"] = tuple(fields["onnx_shape"])
    for key in NUMBERS:
        fields[key] = _number_from_json(fields[key])
    return OutputComparison(**fields)


# Figures that can be infinite (NaN against a number): strict JSON has no Infinity, so they
# are written as the strings "inf", "-inf" or "nan" and read back as floats.
NUMBERS = ("max_abs_diff", "max_rel_diff", "smallest_passing_atol")


def number_to_json(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _number_from_json(value: float | str | None) -> float | None:
    return float(value) if isinstance(value, str) else value
