"""The per-model files beside the exported model: `<name>.parity.json`,
`<name>.divergence.json` and `<name>.<variant>.parity.json`, built from serialization's values."""

from __future__ import annotations

from onnx_parity import __version__
from onnx_parity.findings import Severity
from onnx_parity.report.json_figures import number_to_json
from onnx_parity.report.json_shapes import DivergenceRecord, ParityRecord, VariantRecord
from onnx_parity.report.json_values import finding_to_json
from onnx_parity.report.lengths_json import axis_sizes_to_json
from onnx_parity.report.serialization import (
    RULE,
    comparisons_to_json,
    files_to_json,
    nodes_to_json,
    variant_figures,
    variant_findings,
)
from onnx_parity.results import ModelResult, VariantResult

# ---------------------------------------------------------------------------------------------
# <name>.parity.json: what a later reader needs to trust the exported model file


def parity_record(model: ModelResult, versions: dict[str, str],
                  onnx_file: str | None) -> ParityRecord:
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
        "comparisons": comparisons_to_json(model.comparisons),
        "onnx_file": onnx_file,
        "onnx_sha256": model.onnx_sha256,
        "onnx_files": files_to_json(model.onnx_files),
        "sample_sha256": dict(model.sample_sha256),
        "findings": [finding_to_json(f) for f in model.findings],
        "runtime_optimization": model.runtime_optimization,
        "forward_kwargs": dict(model.forward_kwargs),
        "axis_sizes": axis_sizes_to_json(model.axis_sizes),
    }


# ---------------------------------------------------------------------------------------------
# <name>.divergence.json: every intermediate value compared for a failing model, in graph order


def divergence_record(model: ModelResult) -> DivergenceRecord | None:
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
        "nodes": nodes_to_json(divergence.nodes),
    }


def variant_record(model: ModelResult, variant: VariantResult,
                   versions: dict[str, str]) -> VariantRecord:
    """`<model>.<variant>.parity.json`: what the variant was made from, how, and its figures."""
    found = variant_findings(model, variant.name)
    return {
        "model": model.name,
        "variant": variant.name,
        "passed": all(f.severity != Severity.ERROR for f in found),
        "tool_version": __version__,
        "versions": dict(versions),
        "made_from": {"onnx_file": f"{model.name}.onnx", "onnx_sha256": model.onnx_sha256,
                      "onnx_files": files_to_json(model.onnx_files)},
        **variant_figures(model, variant),
        "findings": [finding_to_json(f) for f in found],
    }
