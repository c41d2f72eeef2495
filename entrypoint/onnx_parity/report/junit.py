"""report.junit.xml: the run as one JUnit test suite, for test-report tools and CI views.

A pure function of the run's results. One test case per model (its check time as `time`);
each error finding is a `<failure>` whose `message` is the finding's message and whose text
adds the fix and the file and line; warnings and notes go to the case's `<system-out>`. Valid
against the JUnit XSD that pytest validates its own reports with (Jenkins' junit-10.xsd,
vendored under tests/schemas/).

Each case's outcome elements come from `_outcome` alone, and the suite's counts are counted
from those elements: a passing model whose result came from the cache is `<skipped>` (this run
did not check it), a cached failure stays a `<failure>`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from onnx_parity.findings import Finding, Severity
from onnx_parity.results import ModelResult, Provenance, RunResult

SUITE = "onnx-parity"
# Characters XML 1.0 cannot carry at all (a model's message may quote anything).
_XML_FORBIDDEN = dict.fromkeys(
    [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0xFFFE, 0xFFFF], None)


def render_junit(run: RunResult) -> str:
    """The XML text of `run`'s JUnit report (UTF-8, with its declaration)."""
    cases = [_case(model, run.config_path) for model in run.models]
    seconds = _time(sum(model_seconds(model) for model in run.models))
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(_has(case, "failure") for case in cases)),
        "errors": "0",
        "skipped": str(sum(_has(case, "skipped") for case in cases)),
    }
    suites = ET.Element("testsuites", {"name": SUITE, **_without(counts, "skipped"),
                                       "time": seconds})
    suite = ET.SubElement(suites, "testsuite", {"name": f"{SUITE}: {run.config_path}",
                                                **counts, "time": seconds})
    suite.extend(cases)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def model_seconds(model: ModelResult) -> float:
    """How long the model's check took: its worker's wall time, else the sum of its steps."""
    if model.seconds is not None:
        return model.seconds
    return sum(step.seconds for step in model.steps)


def _case(model: ModelResult, config_path: str) -> ET.Element:
    case = ET.Element("testcase", {"name": model.name, "classname": config_path,
                                   "time": _time(model_seconds(model))})
    case.extend(_outcome(model))
    lines = [_line(f) for f in model.findings if f.severity != Severity.ERROR]
    if model.cached_from is not None and not model.passed:
        lines.insert(0, _reused(model.cached_from).replace("passing ", "failing "))
    if lines:
        ET.SubElement(case, "system-out").text = _text("\n".join(lines))
    return case


def _outcome(model: ModelResult) -> list[ET.Element]:
    """What the case reports: one `<failure>` per error finding, nothing when it passed.

    A passing model whose result came from the cache is `<skipped>`: this run did not check it.
    A cached failure stays a failure (the gate fails on it), its origin in `<system-out>`.
    """
    if model.cached_from is not None and model.passed:
        return [ET.Element("skipped", {"message": _text(_reused(model.cached_from))})]
    return [_failure(finding) for finding in model.findings
            if finding.severity == Severity.ERROR]


def _reused(origin: Provenance) -> str:
    measured = ", ".join([f"measured {origin.created}",
                          *([f"commit {origin.commit[:12]}"] if origin.commit else []),
                          *([f"run {origin.run_id}"] if origin.run_id else [])])
    return (f"not re-run: nothing it reads changed, so its passing result was reused from the "
            f"cache ({measured})")


def _failure(finding: Finding) -> ET.Element:
    failure = ET.Element("failure", {"type": finding.code,
                                     "message": _text(" ".join(finding.message.split()))})
    lines = [finding.message, f"Fix: {finding.suggested_fix}"]
    if finding.file:
        lines.append(f"At: {_where(finding)}")
    failure.text = _text("\n".join(lines))
    return failure


def _line(finding: Finding) -> str:
    where = f" at {_where(finding)}" if finding.file else ""
    return f"{finding.severity.value} {finding.code}{where}: {' '.join(finding.message.split())}"


def _where(finding: Finding) -> str:
    return f"{finding.file}:{finding.line}" if finding.line else str(finding.file)


def _has(case: ET.Element, tag: str) -> bool:
    return case.find(tag) is not None


def _without(counts: dict[str, str], key: str) -> dict[str, str]:
    """<testsuites> has no `skipped` attribute in the XSD."""
    return {name: value for name, value in counts.items() if name != key}


def _time(seconds: float) -> str:
    """Seconds with three decimals: the XSD's SUREFIRE_TIME allows no more."""
    return f"{max(0.0, seconds):.3f}"


def _text(text: str) -> str:
    return text.translate(_XML_FORBIDDEN)
