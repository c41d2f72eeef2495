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
from onnx_parity.findings import Finding
from onnx_parity.results import (
    BaseFigures,
    Baseline,
    Divergence,
    ExportAttempt,
    ModelResult,
    NodeCheck,
    OutputComparison,
    Provenance,
    RunResult,
    Shard,
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
        "shard": run.shard.label if run.shard else None,
        "shard_plan": run.shard_plan,
        "configured_models": list(run.configured_models),
        "configuration_sha256": run.configuration_sha256,
        "baseline": encode(run.baseline),
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
        "cached": model.cached,
        "cached_from": encode(model.cached_from),
        "baseline": encode(model.base),
        "divergence": encode(model.divergence),
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
        models = tuple(model_from_json(item) for item in data["models"])
        return RunResult(config_path=str(data["config"]), versions=dict(data["versions"]),
                         models=models, shard=shard_from_text(data.get("shard")),
                         configured_models=tuple(data.get("configured_models") or ()),
                         configuration_sha256=data.get("configuration_sha256"),
                         baseline=_baseline_from_json(data.get("baseline")),
                         shard_plan=data.get("shard_plan"))
    except (KeyError, TypeError, ValueError) as error:
        raise ReportFormatError(f"report.json is incomplete ({error}). Fix: pass the unmodified "
                                "report.json written by `onnx-parity check`.") from None


def model_from_json(item: dict[str, Json]) -> ModelResult:
    """One model of report.json (also what the cache keeps of a result)."""
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
        cached_from=Provenance(**item["cached_from"]) if item.get("cached_from") else None,
        base=_base_from_json(item.get("baseline")),
        divergence=divergence_from_json(item.get("divergence")),
    )


def divergence_from_json(data: Json) -> Divergence | None:
    """Every node compared for a localised failure (the comment's drift chart needs them)."""
    if not data:
        return None
    nodes = tuple(NodeCheck(**{**node, "max_abs_diff": _number(node["max_abs_diff"]),
                               "max_rel_diff": _number(node["max_rel_diff"])})
                  for node in data["nodes"])
    fields = {**data, "nodes": nodes,
              "input_shapes": {k: tuple(v) for k, v in data["input_shapes"].items()},
              "inputs_max_abs_diff": _number(data.get("inputs_max_abs_diff"))}
    return Divergence(**fields)


def _base_from_json(data: Json) -> BaseFigures | None:
    if not data:
        return None
    return BaseFigures(passed=bool(data["passed"]), max_abs_diff=_number(data["max_abs_diff"]),
                       error_codes=tuple(data["error_codes"]))


def _baseline_from_json(data: Json) -> Baseline | None:
    if not data:
        return None
    return Baseline(tool_version=str(data["tool_version"]), config_path=str(data["config_path"]),
                    removed_models=tuple(data["removed_models"]),
                    notes=tuple(data.get("notes", ())))


def shard_from_text(text: Json) -> Shard | None:
    """"K/N" as report.json writes it (None: not a shard)."""
    if not text:
        return None
    index, _, count = str(text).partition("/")
    return Shard(int(index), int(count))
