"""The export step of one model: pick the export batch, try the exporters in order, review."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.engine.binding import BoundInputs
from onnx_parity.engine.results import ExportAttempt
from onnx_parity.engine.torch_side import ReferenceFailure, as_tensors, batch_arrays, run_reference
from onnx_parity.export.capture import CapturedWarning
from onnx_parity.export.exporters import ExportError, ExportRequest, Exported, export
from onnx_parity.export.inspection import inspect_model
from onnx_parity.export.review import (failure_finding, trace_divergence,
                                       warning_findings)
from onnx_parity.findings import Finding
from onnx_parity.models.factory import user_frame
from onnx_parity.settings.schema import ModelSpec

# torch.export specialises size-1 dimensions: a dynamic batch must be exported from >= 2.
DYNAMIC_EXPORT_BATCH = 2


@dataclass(frozen=True)
class ExportOutcome:
    exporter: str | None
    model_bytes: bytes | None
    export_batch: int
    # Evidence that the batch axis is frozen, found before export (PyTorch fails at batch 2).
    frozen: str | None
    attempts: tuple[ExportAttempt, ...]
    findings: tuple[Finding, ...]


def export_model(module: Any, bound: BoundInputs, spec: ModelSpec, repo: Path) -> ExportOutcome:
    try:
        batch, frozen = choose_export_batch(module, bound, spec)
    except ReferenceFailure as error:
        size = first_batch(spec, bound)
        return ExportOutcome(None, None, size, None, (), (reference_finding(error, size, repo),))
    findings: list[Finding] = []
    request = _request(module, bound, spec, start=0, batch=batch)
    exported, failures = _try_exporters(spec.exporters, request)
    attempts = tuple(_attempt(item) for item in (*failures, *([exported] if exported else [])))
    findings += _failure_findings(failures, exported, repo, spec)
    if exported is not None:
        findings += warning_findings(exported.warnings, repo, spec.allow_warnings)
        findings += _second_trace(module, bound, spec, exported, batch)
    return ExportOutcome(
        exporter=exported.exporter if exported else None,
        model_bytes=exported.model_bytes if exported else None,
        export_batch=batch, frozen=frozen, attempts=attempts, findings=tuple(_merge_branches(findings)),
    )


def declares_dynamic_batch(spec: ModelSpec, bound: BoundInputs) -> bool:
    return any(0 in spec.dynamic_axes.get(name, {}) for name in bound.names)


def first_batch(spec: ModelSpec, bound: BoundInputs) -> int:
    """The batch PyTorch must run before anything is exported."""
    return 1 if declares_dynamic_batch(spec, bound) else min(spec.batch_sizes)


def choose_export_batch(module: Any, bound: BoundInputs, spec: ModelSpec) -> tuple[int, str | None]:
    """The batch to export from, and PyTorch's own error when a dynamic batch cannot run.

    Raises ReferenceFailure when PyTorch cannot run the model on the samples at all: that is
    a problem with the model or the samples, not a frozen batch.
    """
    first = first_batch(spec, bound)
    _reference(module, bound, first)
    if not declares_dynamic_batch(spec, bound):
        return first, None
    try:
        _reference(module, bound, DYNAMIC_EXPORT_BATCH)
    except ReferenceFailure as error:
        return 1, (f"declared dynamic, but PyTorch itself cannot run the model at batch "
                   f"{DYNAMIC_EXPORT_BATCH} ({error}) while it runs at batch 1: the batch size "
                   "is hard-coded in forward, so the model was exported from batch 1")
    return DYNAMIC_EXPORT_BATCH, None


def _reference(module: Any, bound: BoundInputs, size: int) -> None:
    feed = batch_arrays(bound.arrays, bound.names, 0, size)
    run_reference(module, as_tensors(feed, bound.names))


def reference_finding(error: ReferenceFailure, size: int, repo: Path) -> Finding:
    """PyTorch fails on the samples themselves: name the user's line and the likely fix."""
    file, line = user_frame(error.cause, repo)
    where = f" at {file}:{line}" if file else ""
    return Finding(
        "runtime-error",
        f"PyTorch fails on the samples at batch {size}{where}: {error}. Fix: make forward run "
        "on the samples (their shape and dtype, axis 0 = samples) — `python -c` with the same "
        "tensors reproduces it.",
        file=file, line=line, evidence=str(error),
    )


def _request(module: Any, bound: BoundInputs, spec: ModelSpec, start: int,
             batch: int) -> ExportRequest:
    feed = batch_arrays(bound.arrays, bound.names, start, batch)
    return ExportRequest(
        module=module, args=as_tensors(feed, bound.names), input_names=bound.names,
        output_names=spec.outputs, dynamic_axes=spec.dynamic_axes, opset=spec.opset,
    )


def _try_exporters(exporters: tuple[str, ...],
                   request: ExportRequest) -> tuple[Exported | None, list[ExportError]]:
    failures: list[ExportError] = []
    for exporter in exporters:
        print(f"--- export with {exporter} (opset {request.opset}) starts", flush=True)
        try:
            exported = export(exporter, request)
        except ExportError as error:
            _log_attempt(exporter, "" if error.output_logged else error.output, error.warnings,
                         f"failed: {error.message}")
            failures.append(error)
        else:
            _log_attempt(exporter, "" if exported.output_logged else exported.output,
                         exported.warnings, "succeeded")
            return exported, failures
    return None, failures


def _log_attempt(exporter: str, output: str, warnings: tuple[CapturedWarning, ...],
                 verdict: str) -> None:
    """Into the model's log (the worker's stdout): what the exporter printed and warned."""
    print(f"--- export with {exporter}: {verdict}")
    for warning in warnings:
        print(f"warning: {warning.describe()}")
    if output.strip():
        print(output.rstrip())
    sys.stdout.flush()


def _attempt(item: Exported | ExportError) -> ExportAttempt:
    if isinstance(item, ExportError):
        return ExportAttempt(item.exporter, False, item.seconds, f"{item.kind}: {item.message}")
    return ExportAttempt(item.exporter, True, item.seconds)


def _failure_findings(failures: list[ExportError], exported: Exported | None, repo: Path,
                      spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    for failure in failures:
        handled = exported is not None
        finding = failure_finding(failure, repo, spec.allow_warnings, fallback_used=handled)
        if finding.code != "export-error" or not handled:
            findings.append(finding)
        findings.extend(warning_findings(failure.warnings, repo, spec.allow_warnings))
    if exported is not None and failures:
        reasons = "; ".join(f"{f.exporter} failed ({f.kind}: {f.message})" for f in failures)
        findings.append(Finding(
            "exporter-fallback", f"exported with {exported.exporter} after: {reasons}",
            details={"attempts": [f.exporter for f in failures] + [exported.exporter]},
        ))
    return findings


def _second_trace(module: Any, bound: BoundInputs, spec: ModelSpec, exported: Exported,
                  batch: int) -> list[Finding]:
    """TorchScript only: trace again from other samples; a different graph means a branch."""
    if exported.exporter != "torchscript" or bound.sample_count <= 1:
        return []
    start = max(1, bound.sample_count - batch)
    try:
        again = export("torchscript", _request(module, bound, spec, start=start, batch=batch))
    except ExportError:
        return []
    first = inspect_model(exported.model_bytes).operators
    second = inspect_model(again.model_bytes).operators
    finding = trace_divergence(first, second, spec.allow_warnings)
    return [finding] if finding else []


def _merge_branches(findings: list[Finding]) -> list[Finding]:
    """One branch at one line is one finding, whichever exporters noticed it."""
    merged: list[Finding] = []
    located: set[tuple[str | None, int | None]] = set()
    for finding in findings:
        if finding.code == "data-dependent-branch":
            key = (finding.file, finding.line)
            if finding.file is not None and key in located:
                continue
            located.add(key)
        merged.append(finding)
    if any(f.code == "data-dependent-branch" and f.file for f in merged):
        merged = [f for f in merged if not (f.code == "data-dependent-branch" and not f.file
                                            and f.message.startswith("the TorchScript tracer"))]
    return merged
