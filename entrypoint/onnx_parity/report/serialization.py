"""Results as JSON and back: report.json and `<name>.parity.json`, the one place they are written.

The `comment` command (two-job mode) re-renders the markdown from report.json alone, so the
file round-trips everything the markdown shows. Figures that can be infinite (NaN against a
number) are written as the strings "inf", "-inf" or "nan": strict JSON has no Infinity.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any

from onnx_parity import __version__
from onnx_parity.errors import UserError
from onnx_parity.findings import Finding, Severity
from onnx_parity.results import (
    ExportAttempt,
    ModelResult,
    OutputComparison,
    RunResult,
    StepTiming,
    VariantComparison,
    VariantResult,
)

SCHEMA_VERSION = 1
# OutputComparison's figures that may be infinite.
NUMBERS = ("max_abs_diff", "max_rel_diff", "smallest_passing_atol")
VARIANT_NUMBERS = ("max_abs_diff", "sqnr_db", "cosine", "top1_agreement")
OPTIONAL_NUMBERS = ("tolerance_share",)
RULE = "|onnx - torch| <= atol + rtol * |torch|"

Json = Any


class ReportFormatError(UserError):
    """A report.json that this version cannot read."""

    title = "report"


# ---------------------------------------------------------------------------------------------
# Values


def encode(value: object) -> Json:
    """Dataclasses as objects in field order, tuples as lists, enums by value, inf as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, float):
        return number_to_json(value)
    return value


def number_to_json(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _number(value: float | str | None) -> float | None:
    return float(value) if isinstance(value, str) else value


def finding_to_json(finding: Finding) -> dict[str, Json]:
    data = encode(finding)
    data["fix"] = finding.suggested_fix
    return {key: value for key, value in data.items() if value not in (None, {})}


def finding_from_json(data: dict[str, Json]) -> Finding:
    names = {f.name for f in dataclasses.fields(Finding)}
    return Finding(**{key: value for key, value in data.items() if key in names})


def comparison_from_json(data: dict[str, Json]) -> OutputComparison:
    fields = dict(data)
    fields["torch_shape"] = tuple(fields["torch_shape"])
    fields["onnx_shape"] = tuple(fields["onnx_shape"])
    for key in NUMBERS:
        fields[key] = _number(fields[key])
    for key in OPTIONAL_NUMBERS:
        fields[key] = _number(fields.get(key))
    fields["input_shapes"] = {name: tuple(shape)
                              for name, shape in fields.get("input_shapes", {}).items()}
    return OutputComparison(**fields)


def axis_sizes_to_json(sizes: dict[str, dict[int, tuple[int, ...]]]) -> dict[str, Json]:
    return {name: {str(axis): list(ran) for axis, ran in axes.items()}
            for name, axes in sizes.items()}


def axis_sizes_from_json(data: dict[str, Json]) -> dict[str, dict[int, tuple[int, ...]]]:
    return {name: {int(axis): tuple(ran) for axis, ran in axes.items()}
            for name, axes in data.items()}


# ---------------------------------------------------------------------------------------------
# report.json


def run_to_json(run: RunResult) -> dict[str, Json]:
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


def model_to_json(model: ModelResult) -> dict[str, Json]:
    return _model_fields(model) | _model_seconds(model)


def _model_seconds(model: ModelResult) -> dict[str, Json]:
    """The worker's wall time, when it was measured (reports of older versions have none)."""
    return {} if model.seconds is None else {"seconds": number_to_json(model.seconds)}


def _model_fields(model: ModelResult) -> dict[str, Json]:
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
        "findings": [finding_to_json(finding) for finding in model.findings],
        "comparisons": encode(model.comparisons),
        "attempts": encode(model.attempts),
        "steps": encode(model.steps),
        "onnx_sha256": model.onnx_sha256,
        "sample_sha256": dict(model.sample_sha256),
        "runtime_optimization": model.runtime_optimization,
        "axis_sizes": axis_sizes_to_json(model.axis_sizes),
        "dimension_sizes": {name: list(ran) for name, ran in model.dimension_sizes.items()},
        "tolerance_share": number_to_json(model.tolerance_share),
        "variants": [variant_to_json(model, variant) for variant in model.variants],
    }


def variant_file(model: str, variant: VariantResult) -> str | None:
    """`<model>.<variant>.onnx` in the output folder, when the variant was built."""
    return f"{model}.{variant.name}.onnx" if variant.size_bytes is not None else None


def variant_findings(model: ModelResult, variant: str) -> list[Finding]:
    return [f for f in model.findings if f.details.get("variant") == variant]


def variant_to_json(model: ModelResult, variant: VariantResult) -> dict[str, Json]:
    return {
        "name": variant.name,
        "file": variant_file(model.name, variant),
        "sha256": variant.sha256,
        "size_bytes": variant.size_bytes,
        "fp32_size_bytes": variant.fp32_size_bytes,
        "latency_ms": variant.latency_ms,
        "fp32_latency_ms": variant.fp32_latency_ms,
        "comparisons": encode(variant.comparisons),
        "notes": list(variant.notes),
        "skipped": variant.skipped,
        "settings": encode(variant.settings),
        "findings": [finding_to_json(f) for f in variant_findings(model, variant.name)],
    }


def variant_from_json(data: dict[str, Json]) -> VariantResult:
    return VariantResult(
        name=data["name"], fp32_size_bytes=data["fp32_size_bytes"],
        size_bytes=data.get("size_bytes"), sha256=data.get("sha256"),
        comparisons=tuple(_variant_comparison(c) for c in data.get("comparisons", [])),
        latency_ms=data.get("latency_ms"), fp32_latency_ms=data.get("fp32_latency_ms"),
        notes=tuple(data.get("notes", [])), skipped=data.get("skipped"),
        settings=dict(data.get("settings", {})),
    )


def _variant_comparison(data: dict[str, Json]) -> VariantComparison:
    fields = dict(data)
    fields["input_shapes"] = {k: tuple(v) for k, v in fields["input_shapes"].items()}
    for key in VARIANT_NUMBERS:
        fields[key] = _number(fields[key])
    return VariantComparison(**fields)


def run_from_json(data: Json) -> RunResult:
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


def _model_from_json(item: dict[str, Json]) -> ModelResult:
    return ModelResult(
        name=item["name"], exporter=item["exporter"], requested_opset=item["requested_opset"],
        opset=item["opset"], atol=item["atol"], rtol=item["rtol"],
        batch_sizes=tuple(item["batch_sizes"]),
        findings=tuple(finding_from_json(f) for f in item["findings"]),
        comparisons=tuple(comparison_from_json(c) for c in item.get("comparisons", [])),
        attempts=tuple(ExportAttempt(**a) for a in item.get("attempts", [])),
        steps=tuple(StepTiming(**s) for s in item.get("steps", [])),
        onnx_sha256=item.get("onnx_sha256"), sample_sha256=dict(item.get("sample_sha256", {})),
        variants=tuple(variant_from_json(v) for v in item.get("variants", [])),
        runtime_optimization=item.get("runtime_optimization", "all"),
        axis_sizes=axis_sizes_from_json(item.get("axis_sizes", {})),
        dimension_sizes={name: tuple(ran)
                         for name, ran in item.get("dimension_sizes", {}).items()},
        seconds=_number(item.get("seconds")),
    )


# ---------------------------------------------------------------------------------------------
# <name>.parity.json: what a later reader needs to trust the exported model file


def parity_record(model: ModelResult, versions: dict[str, str],
                  onnx_file: str | None) -> dict[str, Json]:
    return {
        "model": model.name,
        "passed": model.passed,
        "tool_version": __version__,
        "versions": dict(versions),
        "exporter": model.exporter,
        "opset": model.opset,
        "accepted": {"atol": model.atol, "rtol": model.rtol, "rule": RULE},
        "max_abs_diff_by_batch_size": {
            str(k): number_to_json(v) for k, v in model.diffs_by_batch().items()
        },
        "comparisons": encode(model.comparisons),
        "onnx_file": onnx_file,
        "onnx_sha256": model.onnx_sha256,
        "sample_sha256": dict(model.sample_sha256),
        "findings": [finding_to_json(f) for f in model.findings],
        "runtime_optimization": model.runtime_optimization,
        "axis_sizes": axis_sizes_to_json(model.axis_sizes),
    }


# ---------------------------------------------------------------------------------------------
# <name>.divergence.json: every intermediate value compared for a failing model, in graph order


def divergence_record(model: ModelResult) -> dict[str, Json] | None:
    divergence = model.divergence
    if divergence is None:
        return None
    first = divergence.first
    return {
        "model": model.name,
        "tool_version": __version__,
        "exporter": divergence.exporter,
        "output": divergence.output,
        "batch_size": divergence.batch_size,
        "input_shapes": {k: list(v) for k, v in divergence.input_shapes.items()},
        "runtime_optimization": divergence.optimization,
        "accepted": {"atol": divergence.atol, "rtol": divergence.rtol, "rule": RULE},
        "first_divergence": first.node if first else None,
        "unlocalised": divergence.unlocalised,
        "nodes_compared": len(divergence.nodes),
        "nodes_skipped": divergence.nodes_skipped,
        "seconds": divergence.seconds,
        "nodes": encode(divergence.nodes),
    }


def variant_record(model: ModelResult, variant: VariantResult,
                   versions: dict[str, str]) -> dict[str, Json]:
    """`<model>.<variant>.parity.json`: what the variant was made from, how, and its figures."""
    found = variant_findings(model, variant.name)
    return {
        "model": model.name,
        "variant": variant.name,
        "passed": all(f.severity != Severity.ERROR for f in found),
        "tool_version": __version__,
        "versions": dict(versions),
        "made_from": {"onnx_file": f"{model.name}.onnx", "onnx_sha256": model.onnx_sha256},
        **{key: value for key, value in variant_to_json(model, variant).items()
           if key not in ("findings", "name")},
        "findings": [finding_to_json(f) for f in found],
    }
