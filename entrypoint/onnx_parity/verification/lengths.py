"""A length the exported graph gets wrong on an axis it keeps symbolic: `length-mismatch`.

The graph declares the axis symbolic and matches PyTorch at the committed length, but at
another length (built from the same samples, models/shapes.py) onnxruntime fails or its
outputs differ: the export computed for its own length only (a window, a padding or a loop the
tracer baked in). No tolerance fixes that, so the finding explains any parity mismatch and is
not localised. Where what the export assumed (a guard torch.export kept, a constant shape a
trace baked) explains a failing length, that assumption's `shape-assumption` (built in
assumptions.py) is the finding instead. TracerWarnings the export raised inside installed
packages are warnings of their own while every length runs clean; when one fails they are
quoted as the evidence of its error (file:line and text), since that is where a library read
the length as a Python number; those of a tensor turned into a Python value, the user's or a
package's, explain it (tracer_causes.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnx_parity.export import ConstantShape, ShapeAssumption, UnrolledLoop
from onnx_parity.findings import Finding, Severity
from onnx_parity.results import DimensionLengths
from onnx_parity.verification.assumptions import (
    assumption_findings,
    constant_shape_findings,
    explained,
    loop_findings,
)
from onnx_parity.verification.axis_runs import LengthFailure
from onnx_parity.verification.far_side import BatchRuns
from onnx_parity.verification.repeats import merge_repeats
from onnx_parity.verification.tracer_causes import (
    CAUSE,
    TRACER_CODES,
    TRACER_PREFIX,
    explained_fix,
    place,
    places,
    value_warnings,
)


@dataclass(frozen=True)
class Assumed:
    """What the export assumed of the declared dimensions (export/assumptions.py,
    export/constant_shapes.py), judged here against the lengths the sweep ran."""

    assumptions: tuple[ShapeAssumption, ...] = ()
    constant_shapes: tuple[ConstantShape, ...] = ()
    loops: tuple[UnrolledLoop, ...] = ()  # export/unrolled.py


def length_findings(failures: Sequence[LengthFailure], lengths: Mapping[str, DimensionLengths],
                    assumed: Assumed, export_findings: Sequence[Finding],
                    batches: BatchRuns | None = None) -> list[Finding]:
    """What the export assumed first (`shape-assumption`, which takes precedence where it
    explains a failing length), then one `length-mismatch` per cause for the other failures:
    the lengths failing alike merge into one finding listing them. `batches`: the batch sizes
    that ran, for the assumptions on the batch."""
    failed: dict[str, dict[int, str]] = {}
    for failure in failures:
        failed.setdefault(failure.dimension.name, {})[failure.length] = failure.what()
    ran: dict[str, Sequence[int]] = {name: dimension.run for name, dimension in lengths.items()}
    skipped = {name: tuple(dimension.skipped) for name, dimension in lengths.items()}
    for label in batches.labels if batches else ():
        assert batches is not None
        failed[label], ran[label], skipped[label] = (dict(batches.failed), batches.ran,
                                                     tuple(batches.skipped))
    batch = frozenset(batches.labels if batches else ())
    found = [*assumption_findings(assumed.assumptions, failed, ran, skipped, batch),
             *loop_findings(assumed.loops, failed, ran),
             *constant_shape_findings(assumed.constant_shapes, failed, ran)]
    covered = explained(found)
    mismatches = merge_repeats([_finding(failure) for failure in failures
                                if failure.length not in covered.get(failure.dimension.name, ())])
    return _quoting(found, mismatches, _tracer_warnings(export_findings))


def _quoting(found: list[Finding], mismatches: list[Finding],
             quoted: list[Finding]) -> list[Finding]:
    """Every error of a failing length quotes the export's TracerWarnings (file:line and text):
    where the length was most likely read as a Python number. Those that kept a value constant
    (the user's own lines first) explain the failure: its fix says it follows from them."""
    if not quoted:
        return [*found, *mismatches]
    lines = [f"{place(warning)}: {' '.join((warning.evidence or '').split())}"
             for warning in quoted]
    causes = value_warnings(quoted)
    findings = [finding if finding.severity != Severity.ERROR else _explained(
        finding, causes, evidence="\n".join([finding.evidence or finding.message, *lines]))
        for finding in found]
    findings += [_explained(
        finding, causes, message=f"{finding.message}; the export's TracerWarnings, each a value "
                                 f"the trace kept constant: {places(quoted)}",
        evidence="\n".join([finding.evidence or "", *lines])) for finding in mismatches]
    return findings


def _explained(finding: Finding, causes: list[Finding], message: str | None = None,
               evidence: str | None = None) -> Finding:
    """The finding quoting the warnings; explained by those that kept a value constant."""
    changed = dataclasses.replace(finding, message=message or finding.message,
                                  evidence=evidence)
    if not causes:
        return changed
    own = f" {finding.fix}" if finding.fix else ""
    return dataclasses.replace(
        changed, fix=explained_fix(causes, "The failure at these lengths") + own,
        details={**finding.details, "explained_by": CAUSE})


def _tracer_warnings(export_findings: Sequence[Finding]) -> list[Finding]:
    """The export's TracerWarnings a failing length quotes: those of a value the trace kept
    constant (the user's own first), then any other raised inside an installed package
    (`TracerWarning at transformers/.../modeling_swin.py:123 (an installed package)`)."""
    values = value_warnings(export_findings)
    return values + [finding for finding in export_findings
                     if finding.code in TRACER_CODES and finding.file is None
                     and finding.message.startswith(TRACER_PREFIX) and finding not in values]


def _finding(failure: LengthFailure) -> Finding:
    dimension = failure.dimension
    return Finding(
        "length-mismatch",
        f"{dimension.subject()} is symbolic in the exported model, but "
        f"{failure.what(native=False)}",
        evidence=failure.what(),
        details={"dimension": dimension.name, "axes": [list(m) for m in dimension.members],
                 "passed_sizes": list(failure.passed), "size": failure.length,
                 "batches": list(failure.batches)},
    )
