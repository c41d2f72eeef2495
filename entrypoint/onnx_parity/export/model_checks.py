"""Is the exported model valid ONNX, at the opset asked for? (`onnx-checker`, `opset-mismatch`)"""

from __future__ import annotations

from onnx_parity.export.inspection import ModelFacts
from onnx_parity.findings import Finding
from onnx_parity.settings import ModelSpec


def model_findings(facts: ModelFacts, spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    if facts.checker_error:
        findings.append(Finding("onnx-checker", f"onnx.checker: {facts.checker_error}",
                                evidence=facts.checker_error))
    if facts.opset != spec.opset and spec.export_command is None:  # a command picks its own
        findings.append(Finding(
            "opset-mismatch",
            f"asked for opset {spec.opset}, the exported model declares opset {facts.opset}",
            details={"requested": spec.opset, "actual": facts.opset},
        ))
    return findings
