"""<name>.parity.json: what a later reader needs to trust the exported model file."""

from __future__ import annotations

from typing import Any

from onnx_parity import __version__
from onnx_parity.engine.results import ModelResult
from onnx_parity.report.json_report import comparison_to_json, number_to_json


def parity_record(model: ModelResult, versions: dict[str, str], onnx_file: str) -> dict[str, Any]:
    return {
        "model": model.name,
        "passed": model.passed,
        "tool_version": __version__,
        "versions": dict(versions),
        "exporter": model.exporter,
        "opset": model.opset,
        "accepted": {"atol": model.atol, "rtol": model.rtol,
                     "rule": "|onnx - torch| <= atol + rtol * |torch|"},
        "max_abs_diff_by_batch_size": {
            str(k): number_to_json(v) for k, v in model.diffs_by_batch().items()
        },
        "comparisons": [comparison_to_json(c) for c in model.comparisons],
        "onnx_file": onnx_file,
        "onnx_sha256": model.onnx_sha256,
        "sample_sha256": dict(model.sample_sha256),
        "findings": [f.to_json() for f in model.findings],
    }
