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
    ExportAttempt,
    ModelResult,
    OutputComparison,
    Provenance,
    RunResult,
    Shard,
    StepTiming,
)

SCHEMA_VERSION = 1
# OutputComparison's figures that may be infinite.
NUMBERS = ("max_abs_diff", "max_rel_diff", "smallest_passing_atol")
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
    return OutputComparison(**fields)


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
        "cached": model.cached,
        "cached_from": encode(model.cached_from),
        "baseline": encode(model.base),
    }


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
        cached_from=Provenance(**item["cached_from"]) if item.get("cached_from") else None,
        base=_base_from_json(item.get("baseline")),
    )


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
    }
