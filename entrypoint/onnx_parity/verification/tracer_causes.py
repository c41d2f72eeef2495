"""The export's TracerWarnings of a tensor turned into a Python value, as a failure's cause.

The TorchScript tracer warns where forward turns a tensor into a Python value (`int()`,
`float()`, `bool()`, `math.*` of a size, `torch.tensor(...)` of Python numbers; export/review.py
flags those findings `python_value`): the trace keeps the export batch's value as a constant.
When the export then fails (a parity mismatch at the committed shapes, a length that fails), no
tolerance fixes it and those lines are where to look: the failure's fix says it follows from
them, the user's own lines first, then those inside installed packages, and the warnings
become errors (`promoted`), as a baked branch (`data-dependent-branch`) explains a mismatch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from onnx_parity.findings import Finding, Severity

# The export findings that quote a TracerWarning (export/review.py).
TRACER_CODES = ("tracer-warning", "data-dependent-branch")
TRACER_PREFIX = "TracerWarning at "
# What a failure they explain records as `explained_by`.
CAUSE = "tracer-warning"


def value_warnings(findings: Sequence[Finding]) -> list[Finding]:
    """The TracerWarnings that kept a Python value constant, none explained away in
    `allow-warnings`: the user's own lines first, then those inside installed packages."""
    found = [finding for finding in findings
             if finding.code in TRACER_CODES and finding.details.get("python_value")
             and finding.allowed_by is None]
    return sorted(found, key=lambda finding: finding.file is None)


def place(finding: Finding) -> str:
    """`models/m.py:12`, or `segment_anything/utils/onnx.py:85` inside an installed package."""
    if finding.file:
        return f"{finding.file}:{finding.line}"
    return finding.message.removeprefix(TRACER_PREFIX).split(": ", 1)[0].removesuffix(
        " (an installed package)")


def places(findings: Sequence[Finding]) -> str:
    return ", ".join(dict.fromkeys(place(finding) for finding in findings))


def explained_fix(warnings: Sequence[Finding], what: str) -> str:
    """`what` ("The mismatch", "The failure at these lengths") follows from those lines."""
    own = [finding for finding in warnings if finding.file]
    where = ("compute those values with tensor ops in forward (`x.shape[1]` kept as a tensor, "
             "`torch.where` for a branch) instead of Python numbers" if own else
             "they are inside installed packages: pin a version of the package that exports "
             "this model cleanly, or call it with the sizes it expects")
    return (f"{what} follows from the values the TorchScript trace kept constant at "
            f"{places(warnings)} (the TracerWarnings above, each a tensor turned into a Python "
            f"value): {where}. Do not raise the tolerance: no atol makes a graph that computes "
            "with the export batch's values right for other inputs.")


def promoted(export_findings: Sequence[Finding],
             findings: Sequence[Finding]) -> list[tuple[Finding, Finding]]:
    """(warning, the same warning as an error) for each warning that explains a failure among
    `findings` (one whose `explained_by` is theirs)."""
    if not any(finding.details.get("explained_by") == CAUSE for finding in findings):
        return []
    return [(warning, dataclasses.replace(warning, severity=Severity.ERROR))
            for warning in value_warnings(export_findings)
            if warning.severity != Severity.ERROR]
