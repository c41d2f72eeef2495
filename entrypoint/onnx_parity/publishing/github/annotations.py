"""The run in the step's log: each model's log folded in a group, findings as annotations."""

from __future__ import annotations

import posixpath

from onnx_parity.findings import Finding, Severity
from onnx_parity.publishing.github.commands import Annotation, WorkflowCommands
from onnx_parity.results import ModelResult, RunResult

# GitHub shows about ten annotations of each level per step; more are dropped without a word.
ANNOTATION_CAP = 10


def print_logs(commands: WorkflowCommands, run: RunResult) -> None:
    for model in run.models:
        verdict = "passed" if model.passed else "FAILED"
        with commands.group(f"onnx-parity: {model.name} ({verdict})"):
            commands.untrusted_text(model.log or "(no log output)")


def finding_annotations(run: RunResult, working_directory: str, run_url: str) -> list[Annotation]:
    """Up to ANNOTATION_CAP errors and warnings, then one notice counting the rest."""
    located = [(model, f) for model in run.models for f in model.findings
               if f.file and f.severity in (Severity.ERROR, Severity.WARNING)]
    chosen: list[Annotation] = []
    left_out = 0
    for level, severity in (("error", Severity.ERROR), ("warning", Severity.WARNING)):
        batch = [(m, f) for m, f in located if f.severity == severity]
        chosen += [finding_annotation(level, m, f, working_directory)
                   for m, f in batch[:ANNOTATION_CAP]]
        left_out += max(0, len(batch) - ANNOTATION_CAP)
    if left_out:
        chosen.append(Annotation(
            "notice", f"{left_out} more findings not annotated; see the summary: {run_url}",
            title="onnx-parity"))
    return chosen


def finding_annotation(level: str, model: ModelResult, finding: Finding,
                       working_directory: str) -> Annotation:
    path = posixpath.normpath(posixpath.join(working_directory, str(finding.file)))
    return Annotation(level, f"{finding.message}\nFix: {finding.suggested_fix}",
                      title=f"{finding.code} in {model.name}", file=path, line=finding.line)
