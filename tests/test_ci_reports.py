"""report.sarif and report.junit.xml: valid against the official schemas, and saying what the
report says (the example's committed report.json, and runs made for one rule each).

The real files written by a real run are checked in test_cli.py (the bundled example) and in
test_action_flow.py (the action's outputs).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped

from ci_schemas import junit_errors, sarif_errors
from onnx_parity.findings import CATALOGUE, Finding, Severity
from onnx_parity.report.junit import render_junit
from onnx_parity.report.sarif import render_sarif
from onnx_parity.report.serialization import run_from_json
from onnx_parity.results import ModelResult, Provenance, RunResult, StepTiming

EXPECTED = Path(__file__).resolve().parent / "expected"


def example_run() -> RunResult:
    data = json.loads((EXPECTED / "seed-failures.report.json").read_text(encoding="utf-8"))
    return run_from_json(data)


def model(name: str, *findings: Finding, seconds: float | None = 1.25,
          steps: tuple[StepTiming, ...] = ()) -> ModelResult:
    return ModelResult(name=name, exporter="dynamo", requested_opset=18, opset=18, atol=1e-5,
                       rtol=1e-4, batch_sizes=(1, 4), findings=findings, steps=steps,
                       seconds=seconds)


def write_junit(run: RunResult, tmp_path: Path) -> Path:
    path = tmp_path / "report.junit.xml"
    path.write_text(render_junit(run), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# SARIF


def test_sarif_of_the_example_is_valid_sarif_2_1_0() -> None:
    document = render_sarif(example_run())
    assert sarif_errors(document) == []
    assert document["version"] == "2.1.0"
    assert len(document["runs"]) == 1


def test_sarif_declares_one_rule_per_finding_code_with_its_cause_and_fix() -> None:
    driver = render_sarif(example_run())["runs"][0]["tool"]["driver"]
    assert driver["name"] == "onnx-parity"
    assert [rule["id"] for rule in driver["rules"]] == list(CATALOGUE)
    by_id = {rule["id"]: rule for rule in driver["rules"]}
    frozen = by_id["frozen-dimension"]
    assert frozen["shortDescription"]["text"] == CATALOGUE["frozen-dimension"].title
    assert frozen["help"]["text"] == f"Fix: {CATALOGUE['frozen-dimension'].fix}"
    assert frozen["defaultConfiguration"]["level"] == "error"
    assert by_id["exporter-fallback"]["defaultConfiguration"]["level"] == "note"


def test_sarif_has_one_result_per_located_finding_of_the_example() -> None:
    run = example_run()
    located = [(m.name, f) for m in run.models for f in m.findings if f.file and f.line]
    results = render_sarif(run)["runs"][0]["results"]
    assert len(results) == len(located) > 0
    rules = render_sarif(run)["runs"][0]["tool"]["driver"]["rules"]
    for result, (name, finding) in zip(results, located, strict=True):
        assert result["ruleId"] == finding.code == rules[result["ruleIndex"]]["id"]
        assert result["level"] == finding.severity.value
        place = result["locations"][0]["physicalLocation"]
        assert place["artifactLocation"]["uri"] == finding.file
        assert place["region"]["startLine"] == finding.line
        assert result["message"]["text"].startswith(f"{name}: ")
        assert f"Fix: {finding.suggested_fix}" in result["message"]["text"]
    branch = next(r for r in results if r["ruleId"] == "data-dependent-branch")
    assert branch["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "models/branchy.py"


def test_sarif_paths_are_relative_to_the_repository_root_and_encoded() -> None:
    finding = Finding("tracer-warning", "`float(t)` is traced as a constant",
                      file="my models/net.py", line=7)
    located = RunResult("configs/parity.toml", {}, (model("net", finding),))
    document = render_sarif(located, "services/vision")
    assert sarif_errors(document) == []
    [result] = document["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "services/vision/my%20models/net.py"
    assert document["runs"][0]["automationDetails"]["id"] == \
        "onnx-parity/services/vision/configs/parity.toml/"


def test_sarif_leaves_out_findings_without_a_line_and_keeps_allowed_ones_as_notes() -> None:
    mismatch = Finding("parity-mismatch", "output `y` at batch 4: max abs diff 3.1e-03")
    file_only = Finding("load-error", "weights \"w.pt\" do not exist", file="w.pt")
    allowed = Finding("tracer-warning", "`len(x)` is traced as a constant", file="net.py",
                      line=3, allowed_by="the length is fixed for deployment")
    document = render_sarif(RunResult("onnx-parity.toml", {},
                                      (model("net", mismatch, file_only, allowed),)))
    assert sarif_errors(document) == []
    [result] = document["runs"][0]["results"]
    assert result["level"] == "note"
    assert "Allowed by allow-warnings: the length is fixed for deployment" in \
        result["message"]["text"]


# ---------------------------------------------------------------------------------------------
# JUnit


def test_junit_of_the_example_is_valid_against_the_junit_xsd(tmp_path: Path) -> None:
    assert junit_errors(write_junit(example_run(), tmp_path)) == []


def test_junit_has_one_suite_and_one_case_per_model_read_as_test_reporters_read_it(
        tmp_path: Path) -> None:
    """junitparser is the reader of EnricoMi/publish-unit-test-result-action."""
    run = example_run()
    xml = JUnitXml.fromfile(str(write_junit(run, tmp_path)))
    [suite] = list(xml)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 4, 0, 0)
    cases = {case.name: case for case in suite}
    assert list(cases) == [m.name for m in run.models]
    for result in run.models:
        failures = [r for r in cases[result.name].result if isinstance(r, Failure)]
        errors = [f for f in result.findings if f.severity.value == "error"]
        assert [f.type for f in failures] == [f.code for f in errors]
        assert cases[result.name].is_passed == result.passed
    [branch] = [r for r in cases["branchy"].result if r.type == "data-dependent-branch"]
    assert "Fix: Rewrite the branch as tensor ops" in branch.text
    assert "At: models/branchy.py:9" in branch.text
    assert branch.message.startswith("dynamo refused")  # the finding's own message


def test_junit_case_time_is_the_check_time(tmp_path: Path) -> None:
    measured = model("measured", seconds=12.3456)
    older = model("from-an-older-report", seconds=None,
                  steps=(StepTiming("export", 1.5), StepTiming("verify", 0.25)))
    path = write_junit(RunResult("onnx-parity.toml", {}, (measured, older)), tmp_path)
    assert junit_errors(path) == []
    [suite] = list(JUnitXml.fromfile(str(path)))
    assert {case.name: case.time for case in suite} == {"measured": 12.346,
                                                        "from-an-older-report": 1.75}
    assert suite.time == pytest.approx(14.096)


def test_junit_keeps_warnings_and_notes_in_system_out_and_any_text_well_formed(
        tmp_path: Path) -> None:
    warning = Finding("tracer-warning", "inside transformers: `len(t)`", file="lib.py", line=4,
                      severity=Severity.WARNING)
    hostile = Finding("runtime-error", "onnxruntime said <b>&\x00\x1b[31m</b> ]]>")
    path = write_junit(RunResult("onnx-parity.toml", {},
                                 (model("net", warning, hostile),)), tmp_path)
    assert junit_errors(path) == []
    [suite] = list(JUnitXml.fromfile(str(path)))
    [case] = list(suite)
    assert "warning tracer-warning at lib.py:4: inside transformers" in case.system_out
    [failure] = case.result
    assert failure.message == "onnxruntime said <b>&[31m</b> ]]>"


def test_junit_skips_a_cached_pass_and_keeps_a_cached_failure_a_failure(tmp_path: Path) -> None:
    origin = Provenance("2026-11-30T08:00:00Z", commit="0123456789abcdef0123", run_id="42")
    mismatch = Finding("parity-mismatch", "max abs diff 1e-2 > atol 1e-5", file="m.py", line=3)
    run = RunResult("onnx-parity.toml", {}, (
        replace(model("reused"), cached_from=origin),
        replace(model("reused-failing", mismatch), cached_from=origin),
        model("checked")))
    path = write_junit(run, tmp_path)
    assert junit_errors(path) == []
    [suite] = list(JUnitXml.fromfile(str(path)))
    assert (suite.tests, suite.failures, suite.skipped) == (3, 1, 1)
    cases = {case.name: case for case in suite}
    [skipped] = cases["reused"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message == ("not re-run: nothing it reads changed, so its passing result was "
                               "reused from the cache (measured 2026-11-30T08:00:00Z, commit "
                               "0123456789ab, run 42)")
    [failure] = cases["reused-failing"].result
    assert isinstance(failure, Failure)
    assert failure.type == "parity-mismatch"
    assert "its failing result was reused from the cache" in cases["reused-failing"].system_out
    assert cases["checked"].is_passed
    assert not cases["checked"].result
