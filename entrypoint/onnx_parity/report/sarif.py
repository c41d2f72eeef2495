"""report.sarif: the findings as one SARIF 2.1.0 run, for GitHub code scanning.

A pure function of the run's results. The tool `onnx-parity` declares one rule per finding
code (the catalogue's cause as its description, its standard fix as its help); each finding
that points at a file and line is one result there, so `github/codeql-action/upload-sarif`
shows it in code scanning and on the pull request's diff. Findings without a line (a parity
mismatch, a crash) have no place in the code and stay in report.md, report.json and JUnit.

Paths are relative to the repository root: a finding's file is relative to the folder the
configuration was checked in, so `source_root` (that folder, relative to the repository root,
e.g. the action's `working-directory`) is put in front of it.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import quote

from onnx_parity import __version__
from onnx_parity.findings import CATALOGUE, Code, Finding, Severity
from onnx_parity.results import ModelResult, RunResult

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
TOOL = "onnx-parity"
# Relative URIs are resolved against the checked-out repository (what code scanning expects).
SOURCE_ROOT_ID = "%SRCROOT%"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
RULE_INDEX = {code: index for index, code in enumerate(CATALOGUE)}

Sarif = dict[str, Any]


def render_sarif(run: RunResult, source_root: str = "") -> Sarif:
    """The SARIF log of `run`; `source_root` is the checked folder within the repository."""
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": _driver()},
            # One category per configuration file, so two configurations in one repository
            # keep their own alerts (code scanning closes the alerts a category no longer has).
            "automationDetails": {"id": f"{TOOL}/{_joined(source_root, run.config_path)}/"},
            "results": [_result(model, finding, source_root)
                        for model in run.models for finding in model.findings
                        if finding.file and finding.line],
        }],
    }


def _driver() -> Sarif:
    return {
        "name": TOOL,
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [_rule(code) for code in CATALOGUE],
    }


def _rule(code: Code) -> Sarif:
    info = CATALOGUE[code]
    return {
        "id": code,
        "name": "".join(part.capitalize() for part in code.split("-")),
        "shortDescription": {"text": info.title},
        "fullDescription": {"text": info.title},
        "help": {"text": f"Fix: {info.fix}", "markdown": f"**Fix:** {info.fix}"},
        "defaultConfiguration": {"level": LEVEL[info.severity]},
        "properties": {"tags": ["onnx", "export-parity"]},
    }


def _result(model: ModelResult, finding: Finding, source_root: str) -> Sarif:
    return {
        "ruleId": finding.code,
        "ruleIndex": RULE_INDEX[finding.code],
        "level": LEVEL[finding.severity],
        "message": {"text": _message(model, finding)},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": _uri(source_root, str(finding.file)),
                                     "uriBaseId": SOURCE_ROOT_ID},
                "region": {"startLine": finding.line},
            },
        }],
        "properties": {"model": model.name},
    }


def _message(model: ModelResult, finding: Finding) -> str:
    text = " ".join(finding.message.split())
    if finding.allowed_by:
        return f"{model.name}: {text} Allowed by allow-warnings: {finding.allowed_by}"
    return f"{model.name}: {text} Fix: {finding.suggested_fix}"


def _uri(source_root: str, file: str) -> str:
    """A relative URI reference: the path joined, normalised, percent-encoded (spaces...)."""
    return quote(_joined(source_root, file), safe="/")


def _joined(source_root: str, path: str) -> str:
    root = source_root.strip().strip("/")
    return posixpath.normpath(posixpath.join(root, path)) if root not in ("", ".") else path
