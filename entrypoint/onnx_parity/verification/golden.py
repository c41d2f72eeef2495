"""Committed golden outputs (`output_K.pb` of a Model Zoo folder): the `golden-mismatch` finding."""

from __future__ import annotations

from onnx_parity.findings import Finding
from onnx_parity.models import GoldenCase
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.outputs import describe
from onnx_parity.verification.run_failures import runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure, Session, run_session


def golden_findings(session: Session, golden: tuple[GoldenCase, ...],
                    spec: ModelSpec) -> list[Finding]:
    findings: list[Finding] = []
    for case in golden:
        if not case.outputs:
            continue
        feed = dict(zip(session.input_names, case.inputs, strict=False))
        try:
            actual = run_session(session, feed)
        except RuntimeFailure as error:
            findings.append(runtime_finding(f"onnxruntime fails on {case.dataset}", error))
            continue
        for index, (expected, got) in enumerate(zip(case.outputs, actual, strict=False)):
            result = compare_output(f"output_{index}", len(got) if got.ndim else 1, expected, got,
                                    spec.atol, spec.rtol)
            if not result.passed:
                findings.append(Finding("golden-mismatch", f"{case.dataset}/output_{index}.pb "
                                        + describe(result, spec).replace("at batch", "batch")))
    return findings
