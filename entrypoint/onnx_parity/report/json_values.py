"""The values every JSON file of the run holds, written and read back.

Any result dataclass is written field by field in its order (`encode`); every figure that is
not a finite number (NaN against a number, an overflow, a model's own NaN) as the text "inf",
"-inf" or "nan", since strict JSON has neither (json_figures.py, which each hand-written
record calls too); and a finding, the part of every file a reader acts on, with its code
checked against the vocabulary and its details' figures made floats again when read.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import cast

from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import CATALOGUE, Finding, Severity, parse_code
from onnx_parity.report.json_figures import number_from_json, number_to_json
from onnx_parity.report.json_shapes import FindingJson, JsonValue, Shapes

# The keys of a finding's details whose figures may be infinite (FindingDetails and the typed
# dicts inside it): read back as floats, as the finding had them.
DETAIL_FIGURES = frozenset({"max_abs_diff", "max_rel_diff", "inputs_max_abs_diff",
                            "disabled_max_abs_diff", "smallest_passing_atol", "largest",
                            "value", "sqnr_db", "perplexity", "fp32_perplexity",
                            "top1_agreement", "logit_diff", "margin"})


def encode(value: object) -> JsonValue:
    """Dataclasses as objects in field order, tuples as lists, enums by value, inf as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return encode(value.value)
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, float):
        return number_to_json(value)
    if value is None or isinstance(value, (str, int)):
        return value
    raise TypeError(f"{type(value).__name__} cannot be written as JSON: {value!r}")


def shapes_from_json(data: Shapes) -> dict[str, tuple[int, ...]]:
    return {name: tuple(shape) for name, shape in data.items()}


def finding_to_json(finding: Finding) -> FindingJson:
    data = cast(dict[str, JsonValue], encode(finding))
    data["fix"] = finding.suggested_fix
    return cast(FindingJson, {key: value for key, value in data.items()
                              if value not in (None, {})})


def finding_from_json(data: FindingJson) -> Finding:
    code = parse_code(data["code"])  # ValueError for a code this version does not know
    severity = Severity(data["severity"]) if "severity" in data else CATALOGUE[code].severity
    return Finding(code, data["message"], file=data.get("file"), line=data.get("line"),
                   fix=data.get("fix"), evidence=data.get("evidence"),
                   allowed_by=data.get("allowed_by"), severity=severity,
                   details=details_from_json(data.get("details", {})))


def details_from_json(data: dict[str, JsonValue]) -> FindingDetails:
    """A finding's details as written, their infinite figures floats again, codes checked."""
    details = cast(FindingDetails, _figures_from_json(data))
    if "explained_by" in details:
        details["explained_by"] = parse_code(details["explained_by"])
    return details


def _figures_from_json(value: JsonValue) -> JsonValue:
    if isinstance(value, list):
        return [_figures_from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    return {key: number_from_json(item) if key in DETAIL_FIGURES and isinstance(item, str)
            else _figures_from_json(item) for key, item in value.items()}
