"""The export stage of one model: pick the export batch, try the exporters in order, review.

`export_model` is the stage's entry. It raises ReferenceFailure when PyTorch cannot run the
model on the samples at all (verification turns that into `runtime-error`); everything an
exporter does becomes an attempt and findings in the ExportOutcome.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.export.assumed import AssumedShapes, read_assumed
from onnx_parity.export.assumptions import ShapeAssumption
from onnx_parity.export.capture import CapturedWarning, unlogged
from onnx_parity.export.command import command_export
from onnx_parity.export.constant_shapes import ConstantShape
from onnx_parity.export.export_batch import HardCodedBatch, choose_export_batch
from onnx_parity.export.exporters import Exported, ExportRequest, export
from onnx_parity.export.failures import ExportFailure
from onnx_parity.export.review import (
    OtherExporter,
    fallback_findings,
    merge_branches,
    trace_divergence,
    warning_findings,
)
from onnx_parity.export.structured import export_request
from onnx_parity.export.unrolled import Retrace, UnrolledLoop
from onnx_parity.findings import Finding
from onnx_parity.model_files import ModelFile, remove_model
from onnx_parity.models import (
    BoundInputs,
    Dimension,
    ReferenceFailure,
    as_call,
    batch_arrays,
    dimensions,
    loop_findings,
    resize,
    run_reference,
    widened_for_export,
)
from onnx_parity.results import ExportAttempt
from onnx_parity.settings import EXPORTERS, ModelSpec


@dataclass(frozen=True)
class ExportOutcome:
    exporter: str | None
    model: ModelFile | None  # `<name>.onnx` in the work folder (None: no exporter succeeded)
    export_batch: int
    # Evidence that the batch axis is frozen, found before export (PyTorch fails at batch 2).
    frozen: HardCodedBatch | None
    attempts: tuple[ExportAttempt, ...]
    findings: tuple[Finding, ...]
    program: Any = None  # dynamo's ONNXProgram, for localising a mismatch (never pickled)
    # What the export assumed of the declared dimensions, which the ONNX file does not check.
    assumptions: tuple[ShapeAssumption, ...] = ()  # dynamo: its guards and ranges
    constant_shapes: tuple[ConstantShape, ...] = ()  # TorchScript: its baked sizes
    # The module the exporters saw and how it is called, when it is not the user's own: the
    # flat wrapper of a call with structure (export/structured.py), which localisation runs.
    exported: tuple[Any, BoundInputs] | None = None
    loops: tuple[UnrolledLoop, ...] = ()  # TorchScript: the loops it unrolled


def export_model(module: Any, bound: BoundInputs, spec: ModelSpec, repo: Path,
                 folder: Path, deadline: float | None = None) -> ExportOutcome:
    """The model is written into `folder` (the worker's work folder) as `<name>.onnx`; an
    `export-command` must be done by `deadline` (time.monotonic())."""
    batch, frozen = choose_export_batch(module, bound, spec, repo)
    request, flat = _request(module, bound, spec, start=0, batch=batch)
    destination = folder / f"{spec.name}.onnx"
    exported, failures = (  # the user's own export instead of ours (export/command.py)
        _try_exporters(spec.exporters, request, destination) if spec.export_command is None
        else command_export(spec.export_command, request, destination, deadline))
    tried: list[Exported | ExportFailure] = [*failures, *([exported] if exported else [])]
    attempts = tuple(_attempt(item) for item in tried)
    other = (_other_exporter(spec.exporters, request, failures, _scratch(destination, "other"))
             if exported is None else None)
    findings = fallback_findings(failures, exported, repo, spec.allow_warnings, other)
    findings += loop_findings(module, repo)  # a MoE's loop over the experts hit (models/)
    assumed = AssumedShapes()
    if exported is not None:
        findings += warning_findings(exported.warnings, repo, spec.allow_warnings)
        findings += _second_trace(module, bound, spec, exported, batch)
        if spec.export_command is None:  # a command's file keeps no program or trace to read
            assumed = _assumed(module, bound, spec, (exported, request), (batch, repo))
    return ExportOutcome(
        exporter=exported.exporter if exported else None,
        model=exported.model if exported else None,
        export_batch=batch, frozen=frozen, attempts=attempts,
        findings=tuple(merge_branches(findings)),
        program=exported.program if exported else None,
        assumptions=assumed.assumptions, constant_shapes=assumed.constant_shapes,
        exported=(request.module, flat) if request.module is not module else None,
        loops=assumed.loops,
    )


def _request(module: Any, bound: BoundInputs, spec: ModelSpec, start: int,
             batch: int, length: tuple[Dimension, int] | None = None
             ) -> tuple[ExportRequest, BoundInputs]:
    """The export's call, and how the exporters' module is called; `length`: one declared
    dimension at another length."""
    feed = _export_feed(module, bound, spec, batch_arrays(bound, start, batch))
    if length is not None:
        feed = resize(feed, *length)
    return export_request(module, bound, spec, feed)


def _assumed(module: Any, bound: BoundInputs, spec: ModelSpec,
             done: tuple[Exported, ExportRequest], at: tuple[int, Path]) -> AssumedShapes:
    """What the export assumed, read from its program or from traces at other lengths."""
    (exported, request), (batch, repo) = done, at
    retraces = _retraces(module, bound, spec, exported, batch)
    try:
        return read_assumed(exported, request, dimensions(spec, bound), repo, retraces)
    finally:
        for retrace in retraces:
            remove_model(retrace.model)


def _export_feed(module: Any, bound: BoundInputs, spec: ModelSpec,
                 feed: dict[str, Any]) -> dict[str, Any]:
    """A declared dimension committed at length 1 is exported from 2, if PyTorch runs it."""
    wide = widened_for_export(feed, dimensions(spec, bound))
    if all(wide[name] is feed[name] for name in feed):
        return feed
    try:
        run_reference(module, as_call(wide, bound))
    except ReferenceFailure:
        return feed  # forward wants that length: the graph check will show the fixed size
    return wide


def _scratch(destination: Path, purpose: str) -> Path:
    """Where an export that is not shipped writes its model (removed once read)."""
    return destination.with_name(f".{destination.stem}.{purpose}.onnx")


def _try_exporters(exporters: tuple[str, ...], request: ExportRequest,
                   destination: Path) -> tuple[Exported | None, list[ExportFailure]]:
    failures: list[ExportFailure] = []
    for exporter in exporters:
        print(f"--- export with {exporter} (opset {request.opset}) starts", flush=True)
        try:
            exported = export(exporter, request, destination)
        except ExportFailure as error:
            _log_attempt(exporter, "" if error.output_logged else error.output, error.warnings,
                         f"failed: {error.message}")
            if error.full_text.strip() != error.message:
                print(f"--- {exporter}'s whole message:\n{error.full_text.rstrip()}", flush=True)
            failures.append(error)
        else:
            _log_attempt(exporter, "" if exported.output_logged else exported.output,
                         exported.warnings, "succeeded")
            return exported, failures
    return None, failures


def _other_exporter(exporters: tuple[str, ...], request: ExportRequest,
                    failures: list[ExportFailure], scratch: Path) -> OtherExporter | None:
    """An operator the configured exporter cannot translate: would the other one do? Tried
    (only then, so a passing model pays nothing) to say so; its model is not shipped."""
    others = [name for name in EXPORTERS if name not in exporters]
    if not others or not failures or any(f.kind != "unsupported-operator" for f in failures):
        return None
    print(f"--- export with {others[0]} (not configured: does it export this model?)", flush=True)
    try:
        export(others[0], request, scratch)
    except ExportFailure as error:
        print(f"--- export with {others[0]}: failed too: {error.message}", flush=True)
        return OtherExporter(others[0], False, f"{error.kind}: {error.message}")
    finally:
        remove_model(scratch)
    print(f"--- export with {others[0]}: succeeded (not used)", flush=True)
    return OtherExporter(others[0], True)


def _log_attempt(exporter: str, output: str, warnings: tuple[CapturedWarning, ...],
                 verdict: str) -> None:
    """Into the model's log (the worker's stdout): what the exporter printed and warned."""
    print(f"--- export with {exporter}: {verdict}")
    for warning in warnings:
        print(f"warning: {warning.describe()}")
    if output.strip():
        print(output.rstrip())
    sys.stdout.flush()


def _attempt(item: Exported | ExportFailure) -> ExportAttempt:
    if isinstance(item, ExportFailure):
        return ExportAttempt(item.exporter, False, item.seconds, f"{item.kind}: {item.message}")
    return ExportAttempt(item.exporter, True, item.seconds)


def _second_trace(module: Any, bound: BoundInputs, spec: ModelSpec, exported: Exported,
                  batch: int) -> list[Finding]:
    """TorchScript only: trace again from other samples; a different graph means a branch."""
    if exported.exporter != "torchscript" or bound.sample_count <= 1:
        return []
    start = max(1, bound.sample_count - batch)
    scratch = _scratch(exported.model.path, "retrace")
    try:
        again = export("torchscript",
                       _request(module, bound, spec, start=start, batch=batch)[0], scratch)
        second = _operators(again.model)
    except ExportFailure:
        return []
    finally:
        remove_model(scratch)
    first = _operators(exported.model)
    finding = trace_divergence(first, second, spec.allow_warnings)
    return [finding] if finding else []


def _retraces(module: Any, bound: BoundInputs, spec: ModelSpec, exported: Exported,
              batch: int) -> tuple[Retrace, ...]:
    """TorchScript only: each declared dimension traced again at another length (the first of
    its other sizes PyTorch runs), with its nodes' source lines; read, then removed."""
    if exported.exporter != "torchscript":
        return ()
    feed = _export_feed(module, bound, spec, batch_arrays(bound, 0, batch))
    found: list[Retrace] = []
    for dimension in dimensions(spec, bound):
        name, axis = dimension.members[0]
        size = int(feed[name].shape[axis]) if name in feed else 0
        for other in (n for n in dimension.extra if n >= 2 and n != size):
            scratch = _scratch(exported.model.path, f"length{len(found)}")
            request = _request(module, bound, spec, 0, batch, (dimension, other))[0]
            print(f"--- a TorchScript trace at {dimension.name} {other}, with its nodes' source "
                  "lines (what the trace unrolled or kept constant)", flush=True)
            try:
                with unlogged():  # it prints its whole graph
                    export("torchscript", dataclasses.replace(request, source_lines=True),
                           scratch)
            except ExportFailure as error:
                print(f"--- that trace failed: {error.message}", flush=True)
                remove_model(scratch)
                continue
            found.append(Retrace(dimension.name, size, other, scratch))
            break
    return tuple(found)


def _operators(model: ModelFile) -> tuple[str, ...]:
    import onnx

    return tuple(node.op_type for node in onnx.load(str(model.path),
                                                    load_external_data=False).graph.node)
