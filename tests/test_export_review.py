"""Whose code a warning points at decides what it means: unit tests of export/review.py."""

from __future__ import annotations

from pathlib import Path

from onnx_parity.ansi import strip_ansi
from onnx_parity.export.capture import CapturedWarning
from onnx_parity.export.review import trace_divergence, warning_findings
from onnx_parity.findings import Severity
from onnx_parity.settings.schema import AllowWarning

BOOLEAN = ("Converting a tensor to a Python boolean might cause the trace to be incorrect. "
           "We can't record the data flow of Python values.")
FLOAT = "Converting a tensor to a Python float might cause the trace to be incorrect."


def tracer(file: Path, line: int, message: str) -> CapturedWarning:
    return CapturedWarning("TracerWarning", message, str(file), line)


def test_branch_in_the_repository_is_an_error_at_the_users_line(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    [finding] = warning_findings((tracer(tmp_path / "models" / "net.py", 12, BOOLEAN),),
                                 tmp_path, ())
    assert finding.code == "data-dependent-branch"
    assert finding.severity == Severity.ERROR
    assert (finding.file, finding.line) == ("models/net.py", 12)


def test_tracer_warning_inside_an_installed_package_is_a_warning(tmp_path: Path) -> None:
    library = tmp_path / "venv" / "lib" / "site-packages" / "transformers" / "masking_utils.py"
    outside = warning_findings((tracer(library, 40, FLOAT),), tmp_path / "repo", ())
    vendored = warning_findings((tracer(library, 40, FLOAT),), tmp_path, ())
    for [finding] in (outside, vendored):
        assert finding.code == "tracer-warning"
        assert finding.severity == Severity.WARNING
        assert finding.file is None
        assert "an installed package" in finding.message


def test_allow_warnings_match_turns_it_into_a_note_with_the_reason(tmp_path: Path) -> None:
    allowed = (AllowWarning("Python boolean", "constant for deployed inputs"),)
    [finding] = warning_findings((tracer(tmp_path / "net.py", 3, BOOLEAN),), tmp_path, allowed)
    assert finding.severity == Severity.NOTE
    assert finding.allowed_by == "constant for deployed inputs"
    [other] = warning_findings((tracer(tmp_path / "net.py", 4, FLOAT),), tmp_path, allowed)
    assert other.severity == Severity.ERROR  # the entry explains booleans, not floats


def test_one_finding_per_line_and_other_categories_ignored(tmp_path: Path) -> None:
    warnings = (tracer(tmp_path / "net.py", 3, BOOLEAN), tracer(tmp_path / "net.py", 3, BOOLEAN),
                CapturedWarning("DeprecationWarning", "legacy exporter", str(tmp_path / "x.py"), 1))
    assert len(warning_findings(warnings, tmp_path, ())) == 1


def test_two_traces_that_differ_are_a_branch_and_name_the_first_difference() -> None:
    finding = trace_divergence(("Gemm", "Mul"), ("Gemm", "Sub"), ())
    assert finding is not None
    assert "node 1 is Mul in one and Sub in the other" in finding.message
    assert trace_divergence(("Gemm", "Mul"), ("Gemm", "Mul"), ()) is None


def test_ansi_codes_are_stripped() -> None:
    assert strip_ansi("\x1b[96mThis is step 1/3\x1b[0m") == "This is step 1/3"
