"""The vocabulary every stage reports in: finding codes, severities and findings.

Codes are a public contract (documented in the README with cause and fix). `Code` spells
them as one type, so a misspelt code is a mypy error, not a finding that never matches; the
catalogue (`finding_catalogue.py`, which this module owns and re-exports) is the single place
each code's severity, standard fix and policy live, so the report, the PR comment, the
annotations and the cache always say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from onnx_parity.finding_catalogue import CATALOGUE
from onnx_parity.finding_codes import CODES, Code, CodeInfo, Severity, parse_code
from onnx_parity.finding_details import FindingDetails

__all__ = ["CATALOGUE", "CODES", "Code", "CodeInfo", "Finding", "Severity", "parse_code"]


# A Finding made without a severity gets its code's from the catalogue (in __post_init__).
_CATALOGUE_SEVERITY = cast(Severity, None)


@dataclass(frozen=True)
class Finding:
    """One thing found about a model, with the evidence a reader needs to act."""

    code: Code
    message: str
    file: str | None = None
    line: int | None = None
    fix: str | None = None
    evidence: str | None = None
    allowed_by: str | None = None
    severity: Severity = _CATALOGUE_SEVERITY
    details: FindingDetails = field(default_factory=lambda: cast("FindingDetails", {}))

    def __post_init__(self) -> None:
        if self.code not in CATALOGUE:
            raise ValueError(f"unknown finding code {self.code!r}")
        # An explained warning stays visible as a note; otherwise the catalogue decides
        # unless the producer chose deliberately (e.g. a tracer warning in an installed
        # library is a warning, not an error, since the user cannot change that code).
        given = getattr(self, "severity")  # noqa: B009 (None when left out: not a Severity yet)
        if self.allowed_by is not None:
            object.__setattr__(self, "severity", Severity.NOTE)
        elif given is None:
            object.__setattr__(self, "severity", CATALOGUE[self.code].severity)
        else:
            object.__setattr__(self, "severity", Severity(given))

    @property
    def suggested_fix(self) -> str:
        return self.fix or CATALOGUE[self.code].fix
