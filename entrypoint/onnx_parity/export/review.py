"""Turn what the exporters said (failures, warnings, differing traces) into findings.

A warning's file tells whose code it is: inside the repository it is the user's to fix and an
error; inside an installed package it is reported as a warning (nothing to fix locally), unless
it turned a tensor into a Python value (`python_value`) and the export then fails: verification
makes it an error there (verification/tracer_causes.py). A fix names an exporter only when it
was tried for this model and exported it.
An `allow-warnings` entry whose `match` occurs in the message keeps the finding as a note with
the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.export.capture import CapturedWarning
from onnx_parity.export.exporters import Exported
from onnx_parity.export.failures import ExportFailure
from onnx_parity.findings import Finding, Severity
from onnx_parity.locations import innermost_user_frame, repo_relative, scrub_paths
from onnx_parity.settings import AllowWarning

BRANCH_PHRASE = "Converting a tensor to a Python boolean"
# TracerWarnings of a tensor turned into a Python value (`int()`, `float()`, `bool()`, `math.*`
# of a size, `.tolist()`, `.numpy()`) or a `torch.tensor(...)` of Python numbers: the trace
# keeps the value of the export batch. Such a warning explains a failure at another length or
# on other samples (verification/tracer_causes.py).
VALUE_PHRASES = ("Converting a tensor to a Python", "Converting a tensor to a NumPy array",
                 "results are registered as constants in the trace")
TRACER_CATEGORY = "TracerWarning"
# A source line that reads a shape: a warning there concerns a shape, not a value.
SHAPE_READS = (".shape", ".size(", "len(", ".numel(", ".dim(", ".ndim")


@dataclass(frozen=True)
class OtherExporter:
    """The exporter the configuration does not list, tried only to say whether it would do."""

    exporter: str
    exports: bool
    reason: str | None = None  # why it failed too


def failure_finding(error: ExportFailure, repo: Path, allowed: tuple[AllowWarning, ...],
                    fallback_used: bool, other: OtherExporter | None = None) -> Finding:
    """The finding for one exporter's failure (the caller decides whether it counts)."""
    file, line = innermost_user_frame(error.frames, repo)
    if error.kind == "unsupported-operator":
        operator = error.operator or "an operator"
        handled = "the next exporter handled it" if fallback_used else "no exporter handled it"
        return Finding(
            "unsupported-operator",
            f"{error.exporter} cannot export {operator} ({handled}{_other(other)}): "
            f"{error.message}",
            file=file, line=line,
            severity=Severity.NOTE if fallback_used else Severity.ERROR,
            fix=_operator_fix(other),
            details={"operator": operator, "exporter": error.exporter, "handled": fallback_used,
                     **({"other_exporter": {"exporter": other.exporter, "exports": other.exports}}
                        if other else {})},
        )
    if error.kind == "data-dependent-branch":
        return _allowing(
            Finding(
                "data-dependent-branch",
                f"{error.exporter} refused a Python branch on tensor values"
                + (f" at {file}:{line}" if file else "") + f": {error.message}",
                file=file, line=line, evidence=error.message,
            ),
            allowed,
        )
    return Finding("export-error", f"{error.exporter} failed: {error.message}", file=file,
                   line=line, fix=error.fix)


def warning_findings(warnings: tuple[CapturedWarning, ...], repo: Path,
                     allowed: tuple[AllowWarning, ...]) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[tuple[str, str, int]] = set()
    for warning in warnings:
        if warning.category != TRACER_CATEGORY:
            continue
        finding = _allowing(_tracer_finding(warning, repo), allowed)
        key = (finding.code, warning.file, warning.line)  # one finding per line warned at
        if key not in seen:
            seen.add(key)
            findings.append(finding)
    return findings


def _operator_fix(other: OtherExporter | None) -> str | None:
    """An exporter is recommended only when it was tried and exported this model."""
    if other is None:
        return None
    if other.exports:
        return (f'Set `exporter = "{other.exporter}"`: it exports this model (tried for this '
                "report, not checked against PyTorch until you set it).")
    return ("Neither exporter exports this operator: rewrite the operation with supported ops, "
            "or try a newer `opset`.")


ALL_FAILED_FIX = ("Both exporters were tried for this model and failed (each message is above): "
                  "rewrite the code each message names with supported operations, or try "
                  "another `opset`.")


def _other(other: OtherExporter | None) -> str:
    if other is None:
        return ""
    if other.exports:
        return f"; {other.exporter}, which the configuration does not list, exports this model"
    return f"; {other.exporter} fails on it too ({other.reason})"


def _tracer_finding(warning: CapturedWarning, repo: Path) -> Finding:
    file = repo_relative(warning.file, repo)
    line = warning.line if file else None
    branch = BRANCH_PHRASE in warning.message
    package = scrub_paths(f"{warning.file}:{warning.line}", (repo,)).removeprefix(
        "site-packages/").removeprefix("dist-packages/")
    where = f"{file}:{line}" if file else f"{package} (an installed package)"
    return Finding(
        "data-dependent-branch" if branch else "tracer-warning",
        f"TracerWarning at {where}: {_first_sentence(warning.message)}",
        file=file, line=line, evidence=warning.message,
        # Not the user's code: a warning, since there is nothing to fix in the repository.
        severity=Severity.ERROR if file else Severity.WARNING,
        fix=None if file else _library_fix(warning, package),
        details={"python_value": True}
        if any(phrase in warning.message for phrase in VALUE_PHRASES) else {},
    )


def _library_fix(warning: CapturedWarning, where: str) -> str:
    """Whose code it is, whether it concerns a shape or a value, and what the user can do."""
    owner = where.split("/", 1)[0]
    text = _line_text(warning.file, warning.line)
    reads_shape = any(read in text for read in SHAPE_READS)
    concern = (
        "It reads a shape: onnx-parity runs the model at every declared shape (`batch-sizes`, "
        "`axis-sizes`), so a shape baked in there fails at the length it breaks "
        "(`length-mismatch`, quoting this warning)."
        if reads_shape else
        "It turns a tensor value into a Python value: the export keeps the value the export "
        "batch gave."
    )
    return (f"This code belongs to the installed package {owner} ({where}), not to your "
            f"repository: there is nothing to rewrite on your side. {concern} Pin the "
            f"{owner} version that exports it cleanly, or accept the warning in "
            "`[[model.allow-warnings]]` with a reason.")


def _line_text(path: str, line: int) -> str:
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else ""


def trace_divergence(first: tuple[str, ...], second: tuple[str, ...],
                     allowed: tuple[AllowWarning, ...]) -> Finding | None:
    """Two TorchScript traces from different sample batches must give the same graph."""
    if first == second:
        return None
    message = (
        "the TorchScript tracer recorded different graphs for two different sample batches "
        f"({len(first)} nodes vs {len(second)}: {_diff(first, second)}); the exported model "
        "follows whichever path the export batch took"
    )
    return _allowing(Finding("data-dependent-branch", message), allowed)


def _diff(first: tuple[str, ...], second: tuple[str, ...]) -> str:
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return f"node {index} is {a} in one and {b} in the other"
    return "one graph is a prefix of the other"


def _allowing(finding: Finding, allowed: tuple[AllowWarning, ...]) -> Finding:
    text = f"{finding.message}\n{finding.evidence or ''}"
    for entry in allowed:
        if entry.match in text:
            return Finding(finding.code, finding.message, file=finding.file, line=finding.line,
                           evidence=finding.evidence, allowed_by=entry.reason,
                           details=finding.details)
    return finding


def _first_sentence(message: str) -> str:
    head = " ".join(message.split())
    cut = head.find(". ")
    return head if cut < 0 else head[: cut + 1]


def fallback_findings(failures: Sequence[ExportFailure], exported: Exported | None, repo: Path,
                      allowed: tuple[AllowWarning, ...],
                      other: OtherExporter | None = None) -> list[Finding]:
    """Each failed exporter's finding and warnings; a note when a later exporter took over."""
    findings: list[Finding] = []
    handled = exported is not None
    # Every exporter failed, each tried: no fix may send the model to "the other exporter".
    tried_all = not handled and len({failure.exporter for failure in failures}) > 1
    for failure in failures:
        finding = failure_finding(failure, repo, allowed, fallback_used=handled, other=other)
        if tried_all and finding.code in ("unsupported-operator", "export-error") \
                and finding.fix is None:
            finding = dataclasses.replace(finding, fix=ALL_FAILED_FIX)
        if finding.code != "export-error" or not handled:
            findings.append(finding)
        findings.extend(warning_findings(failure.warnings, repo, allowed))
    if exported is not None and failures:
        reasons = "; ".join(f"{f.exporter} failed ({f.kind}: {f.message})" for f in failures)
        findings.append(Finding(
            "exporter-fallback", f"exported with {exported.exporter} after: {reasons}",
            fix=next((f.fix for f in failures if f.fix), None),  # a failure's own fix
            details={"attempts": [f.exporter for f in failures] + [exported.exporter]},
        ))
    return findings


def merge_branches(findings: list[Finding]) -> list[Finding]:
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
