"""Results as JSON and back: report.json and `<name>.parity.json`, the one place they are written.

`comment` re-renders the markdown from report.json alone, so the file round-trips all it shows.
Figures that are not finite are "inf", "-inf" or "nan" (json_figures.py); the shapes are
json_shapes.py's typed dicts, and a report.json without its shape is a ReportFormatError."""

from __future__ import annotations

from typing import cast

from onnx_parity import __version__
from onnx_parity.errors import UserError
from onnx_parity.findings import Finding, parse_code
from onnx_parity.report.detections_json import detections_from_json, detections_to_json
from onnx_parity.report.generation.generation_json import (
    generation_from_json,
    generation_to_json,
    routing_from_json,
    routing_to_json,
    text_from_json,
    text_to_json,
)
from onnx_parity.report.json_figures import number_from_json as _number
from onnx_parity.report.json_figures import number_to_json
from onnx_parity.report.json_shapes import (
    AttemptJson,
    BaseFiguresJson,
    BaselineJson,
    ComparisonJson,
    DivergenceJson,
    JsonValue,
    ModelJson,
    NodeJson,
    ProvenanceJson,
    RunJson,
    StepJson,
    StoredFileJson,
    VariantComparisonJson,
    VariantFiguresJson,
    VariantJson,
)
from onnx_parity.report.json_values import encode, finding_from_json, finding_to_json
from onnx_parity.report.json_values import shapes_from_json as _shapes
from onnx_parity.report.lengths_json import (
    axis_sizes_from_json,
    axis_sizes_to_json,
    lengths_from_json,
    lengths_to_json,
)
from onnx_parity.report.repro_json import repro_from_json, repro_to_json
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
    StoredFile,
    VariantComparison,
    VariantResult,
)

SCHEMA_VERSION = 1
RULE = "|onnx - torch| <= atol + rtol * |torch|"


class ReportFormatError(UserError):
    """A report.json that this version cannot read."""

    title = "report"


def comparison_from_json(data: ComparisonJson) -> OutputComparison:
    return OutputComparison(
        output=data["output"], batch_size=data["batch_size"],
        torch_shape=tuple(data["torch_shape"]), onnx_shape=tuple(data["onnx_shape"]),
        torch_dtype=data["torch_dtype"], onnx_dtype=data["onnx_dtype"],
        max_abs_diff=_number(data["max_abs_diff"]), max_rel_diff=_number(data["max_rel_diff"]),
        mismatched=data["mismatched"], total=data["total"],
        smallest_passing_atol=_number(data["smallest_passing_atol"]), passed=data["passed"],
        input_shapes=_shapes(data.get("input_shapes", {})),
        tolerance_share=_number(data.get("tolerance_share")),
        dimensions=dict(data.get("dimensions", {})),
        left_out=data.get("left_out", 0), left_out_by=data.get("left_out_by"),
    )


# ---------------------------------------------------------------------------------------------
# report.json


def run_to_json(run: RunResult) -> RunJson:
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
        "baseline": cast(BaselineJson | None, encode(run.baseline)),
        "env": list(run.env),
    }


def model_to_json(model: ModelResult) -> ModelJson:
    data = _model_fields(model)
    if model.seconds is not None:  # reports of older versions have no time
        data["seconds"] = number_to_json(model.seconds)
    if model.linked_axes:  # only a model that declares an expression (`past + 1`) has them
        data["linked_axes"] = {name: list(axes) for name, axes in model.linked_axes.items()}
    if model.generation is not None:  # a generating model's decoding (`generate`)
        data["generation"] = generation_to_json(model.generation)
    if model.detections:  # a detector's images matched (`[model.detections]`)
        data["detections"] = detections_to_json(model.detections)
    return data


def _model_fields(model: ModelResult) -> ModelJson:
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
        "comparisons": comparisons_to_json(model.comparisons),
        "attempts": cast(list[AttemptJson], encode(model.attempts)),
        "steps": cast(list[StepJson], encode(model.steps)),
        "onnx_sha256": model.onnx_sha256,
        "onnx_files": files_to_json(model.onnx_files),
        "sample_sha256": dict(model.sample_sha256),
        "runtime_optimization": model.runtime_optimization,
        "forward_kwargs": dict(model.forward_kwargs),
        "axis_sizes": axis_sizes_to_json(model.axis_sizes),
        "dimension_sizes": {name: list(ran) for name, ran in model.dimension_sizes.items()},
        "lengths": {name: lengths_to_json(lengths) for name, lengths in model.lengths.items()},
        "tolerance_share": number_to_json(model.tolerance_share),
        "variants": [variant_to_json(model, variant) for variant in model.variants],
        "cached": model.cached,
        "cached_from": cast(ProvenanceJson | None, encode(model.cached_from)),
        "baseline": cast(BaseFiguresJson | None, encode(model.base)),
        "divergence": cast(DivergenceJson | None, encode(model.divergence)),
        "repro": repro_to_json(model),
        "max_rss_bytes": model.max_rss_bytes,
    }


def files_to_json(files: tuple[StoredFile, ...]) -> list[StoredFileJson]:
    """An exported model's files: the .onnx, then its external data when it has any."""
    return cast(list[StoredFileJson], encode(files))


def files_from_json(data: list[StoredFileJson]) -> tuple[StoredFile, ...]:
    return tuple(StoredFile(**item) for item in data)


def comparisons_to_json(comparisons: tuple[OutputComparison, ...]) -> list[ComparisonJson]:
    """OutputComparison's fields in order (ComparisonJson names the same ones)."""
    return cast(list[ComparisonJson], encode(comparisons))


def nodes_to_json(nodes: tuple[NodeCheck, ...]) -> list[NodeJson]:
    return cast(list[NodeJson], encode(nodes))


def variant_file(model: str, variant: VariantResult) -> str | None:
    """`<model>.<variant>.onnx` in the output folder, when the variant was built."""
    return f"{model}.{variant.name}.onnx" if variant.size_bytes is not None else None


def variant_findings(model: ModelResult, variant: str) -> list[Finding]:
    return [f for f in model.findings if f.details.get("variant") == variant]


def variant_figures(model: ModelResult, variant: VariantResult) -> VariantFiguresJson:
    figures: VariantFiguresJson = {
        "file": variant_file(model.name, variant),
        "sha256": variant.sha256,
        "size_bytes": variant.size_bytes,
        "fp32_size_bytes": variant.fp32_size_bytes,
        "files": files_to_json(variant.files),
        "latency_ms": variant.latency_ms,
        "fp32_latency_ms": variant.fp32_latency_ms,
        "comparisons": cast(list[VariantComparisonJson], encode(variant.comparisons)),
        "notes": list(variant.notes),
        "skipped": variant.skipped,
        "settings": cast(dict[str, JsonValue], encode(variant.settings)),
        "text": text_to_json(variant.text),
    }
    if variant.routing is not None:
        figures["routing"] = routing_to_json(variant.routing)
    return figures


def variant_to_json(model: ModelResult, variant: VariantResult) -> VariantJson:
    return {
        "name": variant.name,
        **variant_figures(model, variant),
        "findings": [finding_to_json(f) for f in variant_findings(model, variant.name)],
    }


def variant_from_json(data: VariantJson) -> VariantResult:
    return VariantResult(
        name=data["name"], fp32_size_bytes=data["fp32_size_bytes"],
        size_bytes=data.get("size_bytes"), sha256=data.get("sha256"),
        comparisons=tuple(_variant_comparison(c) for c in data.get("comparisons", [])),
        latency_ms=data.get("latency_ms"), fp32_latency_ms=data.get("fp32_latency_ms"),
        notes=tuple(data.get("notes", [])), skipped=data.get("skipped"),
        settings=dict(data.get("settings", {})),
        files=files_from_json(data.get("files", [])), text=text_from_json(data.get("text")),
        routing=routing_from_json(data.get("routing")))


def _variant_comparison(data: VariantComparisonJson) -> VariantComparison:
    return VariantComparison(
        output=data["output"], batch_size=data["batch_size"],
        input_shapes=_shapes(data["input_shapes"]), max_abs_diff=_number(data["max_abs_diff"]),
        sqnr_db=_number(data["sqnr_db"]), cosine=_number(data["cosine"]),
        top1_agreement=_number(data["top1_agreement"]),
    )


def run_from_json(data: object) -> RunResult:
    if not isinstance(data, dict) or data.get("tool") != "onnx-parity":
        raise ReportFormatError("this is not an onnx-parity report.json (no \"tool\" field). "
                                "Fix: pass the report.json written by `onnx-parity check`.")
    if data.get("schema") != SCHEMA_VERSION:
        raise ReportFormatError(f"report.json schema {data.get('schema')!r} is not "
                                f"{SCHEMA_VERSION}. Fix: use the same onnx-parity version in "
                                "both jobs.")
    try:
        return _run(cast(RunJson, data))
    except (KeyError, TypeError, ValueError) as error:
        raise ReportFormatError(f"report.json is incomplete ({error}). Fix: pass the unmodified "
                                "report.json written by `onnx-parity check`.") from None


def _run(data: RunJson) -> RunResult:
    """report.json read as its shape says; a part that is not raises KeyError, TypeError or
    ValueError (run_from_json names them)."""
    models = tuple(model_from_json(item) for item in data["models"])
    return RunResult(config_path=str(data["config"]), versions=dict(data["versions"]),
                     models=models, shard=shard_from_text(data.get("shard")),
                     configured_models=tuple(data.get("configured_models") or ()),
                     configuration_sha256=data.get("configuration_sha256"),
                     baseline=_baseline_from_json(data.get("baseline")),
                     shard_plan=data.get("shard_plan"), env=tuple(data.get("env") or ()))


def model_from_json(item: ModelJson) -> ModelResult:
    """One model of report.json (also what the cache keeps of a result)."""
    cached_from = item.get("cached_from")
    return ModelResult(
        name=item["name"], exporter=item["exporter"], requested_opset=item["requested_opset"],
        opset=item["opset"], atol=item["atol"], rtol=item["rtol"],
        batch_sizes=tuple(item["batch_sizes"]),
        findings=tuple(finding_from_json(f) for f in item["findings"]),
        comparisons=tuple(comparison_from_json(c) for c in item.get("comparisons", [])),
        attempts=tuple(ExportAttempt(**a) for a in item.get("attempts", [])),
        steps=tuple(StepTiming(**s) for s in item.get("steps", [])),
        onnx_sha256=item.get("onnx_sha256"), sample_sha256=dict(item.get("sample_sha256", {})),
        onnx_files=files_from_json(item.get("onnx_files", [])),
        max_rss_bytes=item.get("max_rss_bytes"),
        variants=tuple(variant_from_json(v) for v in item.get("variants", [])),
        runtime_optimization=item.get("runtime_optimization", "all"),
        forward_kwargs=dict(item.get("forward_kwargs", {})),
        axis_sizes=axis_sizes_from_json(item.get("axis_sizes", {})),
        dimension_sizes={name: tuple(ran)
                         for name, ran in item.get("dimension_sizes", {}).items()},
        linked_axes={name: tuple(axes) for name, axes in item.get("linked_axes", {}).items()},
        lengths={name: lengths_from_json(lengths)
                 for name, lengths in item.get("lengths", {}).items()},
        seconds=_number(item.get("seconds")),
        cached_from=Provenance(**cached_from) if cached_from else None,
        base=_base_from_json(item.get("baseline")),
        divergence=divergence_from_json(item.get("divergence")),
        repro=repro_from_json(item.get("repro")),
        generation=generation_from_json(item.get("generation")),
        detections=detections_from_json(item.get("detections", [])),
    )


def divergence_from_json(data: DivergenceJson | None) -> Divergence | None:
    """Every node compared for a localised failure (the comment's drift chart needs them)."""
    if not data:
        return None
    return Divergence(
        exporter=data["exporter"], output=data["output"], batch_size=data["batch_size"],
        input_shapes=_shapes(data["input_shapes"]), optimization=data["optimization"],
        atol=data["atol"], rtol=data["rtol"],
        nodes=tuple(_node_from_json(node) for node in data["nodes"]),
        nodes_skipped=data["nodes_skipped"], seconds=data["seconds"],
        unlocalised=data.get("unlocalised"),
        inputs_max_abs_diff=_number(data.get("inputs_max_abs_diff")),
    )


def _node_from_json(data: NodeJson) -> NodeCheck:
    return NodeCheck(
        node=data["node"], op=data["op"], module=data["module"], file=data["file"],
        line=data["line"], max_abs_diff=_number(data["max_abs_diff"]),
        max_rel_diff=_number(data["max_rel_diff"]), inside=data["inside"],
        first=data.get("first", False), library_frame=data.get("library_frame"),
    )


def _base_from_json(data: BaseFiguresJson | None) -> BaseFigures | None:
    if not data:
        return None
    return BaseFigures(passed=bool(data["passed"]), max_abs_diff=_number(data["max_abs_diff"]),
                       error_codes=tuple(parse_code(code) for code in data["error_codes"]))


def _baseline_from_json(data: BaselineJson | None) -> Baseline | None:
    if not data:
        return None
    return Baseline(tool_version=str(data["tool_version"]), config_path=str(data["config_path"]),
                    removed_models=tuple(data["removed_models"]),
                    notes=tuple(data.get("notes", ())))


def shard_from_text(text: str | None) -> Shard | None:
    """"K/N" as report.json writes it (None: not a shard)."""
    if not text:
        return None
    index, _, count = str(text).partition("/")
    return Shard(int(index), int(count))
