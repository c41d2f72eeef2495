"""What the export assumed, against the lengths the sweep ran: the `shape-assumption` finding.

The export stage reads what the exported graph is valid under (export/assumptions.py: a guard
or range torch.export kept; export/constant_shapes.py: a shape a TorchScript trace baked). The
ONNX file checks none of it. Here each is judged by the lengths each dimension ran at:

- an error when a length that breaks it ran and failed there (the outputs differ, or
  onnxruntime fails): it explains the failure, no tolerance would fix it;
- a note otherwise, saying what the export assumed: no length that breaks it ran (the note
  names one to add), or those that ran still match PyTorch.

A baked TorchScript shape is reported only where its dimension failed at some length. The
sweep (axis_runs.py) calls these with, per dimension, the lengths it ran and a one-line account
of what failed at each failing length; a finding here takes precedence over its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from onnx_parity.export import ConstantShape, ShapeAssumption, UnrolledLoop
from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding, Severity
from onnx_parity.verification.far_side import far_side_lengths

# The batch's sizes are `batch-sizes`' (axis-sizes refuses the batch axis).
BATCH_FIX = ("Make forward handle every batch size, or set `batch-sizes` to sizes that satisfy "
             "the assumption and document the requirement for the code that runs the ONNX "
             "model.")
Failed = Mapping[str, Mapping[int, str]]  # dimension -> failing length -> what failed there
Ran = Mapping[str, Sequence[int]]  # dimension -> every length both sides ran
# Baked constants quoted per failing dimension (the first in graph order are the likeliest).
MAX_CONSTANTS = 3


def assumption_findings(assumptions: Sequence[ShapeAssumption], failed: Failed, ran: Ran,
                        skipped: Ran | None = None,
                        batch: frozenset[str] = frozenset()) -> list[Finding]:
    """One `shape-assumption` per assumption: an error where it explains a failing length.
    `skipped`: dimension -> the lengths PyTorch itself could not run (not checked); `batch`:
    the names of the batch (whose sizes `batch-sizes` sets, not `axis-sizes`)."""
    found = [_finding(assumption, failed.get(assumption.dimension, {}),
                      tuple(ran.get(assumption.dimension, ())),
                      tuple((skipped or {}).get(assumption.dimension, ())),
                      assumption.dimension in batch)
             for assumption in assumptions]
    return [finding for finding in found if finding is not None]


def explained(findings: Sequence[Finding]) -> dict[str, set[int]]:
    """Dimension -> the failing lengths these findings explain (the sweep reports no other
    finding of its own for them)."""
    found: dict[str, set[int]] = {}
    for finding in findings:
        if finding.code == "shape-assumption" and finding.severity == Severity.ERROR:
            dimension = finding.details.get("dimension", "")
            found.setdefault(dimension, set()).update(finding.details.get("failed_sizes", []))
    return found


def constant_shape_findings(shapes: Sequence[ConstantShape], failed: Failed,
                            ran: Ran) -> list[Finding]:
    """For each dimension that failed at a length, the constants holding its export size."""
    findings: list[Finding] = []
    for dimension, failures in failed.items():
        mine = _likeliest([s for s in shapes if s.dimension == dimension], failures)
        if failures and mine:
            findings.append(_baked(dimension, mine, failures, tuple(ran.get(dimension, ()))))
    return findings


def _finding(assumption: ShapeAssumption, failures: Mapping[int, str], ran: tuple[int, ...],
             skipped: tuple[int, ...], batch: bool = False) -> Finding | None:
    """An error where a length that breaks the assumption failed; else a note of what was
    tested (none for a guard inside torch itself, whose far side matched or was not found)."""
    if assumption.kind in ("unread", "uncaptured"):
        return _unread(assumption, failures)
    name = assumption.dimension
    breaking = [length for length in ran if not assumption.holds(length)]
    failing = [length for length in breaking if length in failures]
    head = (f"the export assumed {assumption.condition} ({_where(assumption)}: "
            f"`{assumption.guard}`), which the ONNX file does not check")
    details: FindingDetails = {"dimension": name, "condition": assumption.condition,
                               "guard": assumption.guard, "violating_sizes": breaking,
                               "failed_sizes": failing}
    if failing:
        return Finding("shape-assumption", f"{head}; it breaks at {name} {_list(failing)}, "
                       f"where the model fails: {_failures(name, failing, failures)}",
                       file=assumption.file, line=assumption.line, severity=Severity.ERROR,
                       details=details, fix=BATCH_FIX if batch else None)
    if _inside_torch(assumption):
        return None  # torch's own bookkeeping, tested on its far side where one exists
    own = [length for length in skipped if not assumption.holds(length)]
    fix = None
    if breaking:
        text = f"{head}; tested at {name} {_list(breaking)}: matches"
    elif own:
        text = (f"{head}; PyTorch itself cannot run the model at {name} {_list(own)}, which "
                "break it: the requirement is the model's own")
        fix = ("Document the requirement for the code that runs the ONNX model: the ONNX file "
               "does not enforce it.")
    elif near := far_side_lengths(assumption, ran[0]) if ran else ():
        text = f"{head}; no length that breaks it ran ({name} ran at {_list(list(ran))})"
        fix = (f"Add a length that breaks it to the `axis-sizes` of {name} (e.g. {near[0]}) to "
               "check what the ONNX model does there; or make forward handle every length, or "
               "document the requirement.")
    else:
        text = (f"{head}; no {name} from a quarter to four times its export "
                f"{'size' if batch else 'length'} breaks it, so none was tested")
    return Finding("shape-assumption", text, file=assumption.file, line=assumption.line,
                   severity=Severity.NOTE, fix=fix, details=details)


def _unread(assumption: ShapeAssumption, failures: Mapping[int, str]) -> Finding:
    """A guard the reader cannot evaluate: a warning quoting it, since where it breaks is
    unknown and nothing tested it; a failing length of its dimension is named beside it."""
    name = assumption.dimension or "a declared dimension"
    failed = (f"; the model fails at {name} {_list(sorted(failures))}, which it may explain"
              if failures else "")
    if assumption.kind == "uncaptured":
        return Finding(
            "shape-assumption",
            f"torch.export could not keep {name} general ({assumption.condition}), so "
            f"torch.onnx.export captured the model itself and what that export assumed of "
            f"{name} was not recorded: the ONNX file may hold a value of the export's {name} "
            f"that no length run shows{failed}", severity=Severity.WARNING,
            fix=(f"Compute what depends on {name} with tensor operations torch.export keeps "
                 "symbolic (no `math.*` of a size), or check every length you deploy with "
                 "`axis-sizes`."),
            details={"dimension": assumption.dimension, "condition": assumption.condition,
                     "guard": "", "violating_sizes": [], "failed_sizes": []})
    return Finding(
        "shape-assumption",
        f"the export assumed {assumption.condition} ({_where(assumption)}), which onnx-parity "
        f"could not evaluate and the ONNX file does not check{failed}",
        file=assumption.file, line=assumption.line, severity=Severity.WARNING,
        fix=(f"Read the condition in terms of {name}, and check a length that breaks it with "
             "`axis-sizes` (or compute the size-dependent value with tensor ops so that no "
             "guard is recorded)."),
        details={"dimension": assumption.dimension, "condition": assumption.condition,
                 "guard": assumption.guard, "violating_sizes": [], "failed_sizes": []})


def _inside_torch(assumption: ShapeAssumption) -> bool:
    """Recorded inside torch itself (fake tensors, decompositions): not the model's choice."""
    return assumption.file is None and (assumption.origin or "").startswith("torch/")


def _baked(dimension: str, shapes: list[ConstantShape], failures: Mapping[int, str],
           ran: tuple[int, ...]) -> Finding:
    first = shapes[0]
    lengths = sorted(failures)
    what = _failures(dimension, lengths, failures)
    quoted = "; ".join(shape.describe() for shape in shapes)
    return Finding(
        "shape-assumption",
        f"the TorchScript export baked {dimension}'s export size {first.size} into a constant "
        f"shape, which the ONNX file keeps at every length: {quoted}; the model fails at "
        f"{dimension} {_list(lengths)}: {what}",
        file=first.file, line=first.line, severity=Severity.ERROR,
        fix=("Compute the size from the tensor (`x.shape[1]`, `x.size(1)`, `-1` in reshape) "
             "instead of a Python int (`int(...)`, `math` on a shape) in the forward named, "
             "or set `axis-sizes` to the export length and document the requirement."),
        details={"dimension": dimension, "condition": f"{dimension} must be {first.size}",
                 "violating_sizes": [n for n in ran if n != first.size],
                 "failed_sizes": lengths, "node": first.node,
                 "constant": list(first.values)},
    )


def loop_findings(loops: Sequence[UnrolledLoop], failed: Failed, ran: Ran) -> list[Finding]:
    """A Python loop the trace unrolled into the export size, where its dimension failed: the
    error names the loop's line, and explains the failing lengths."""
    return [_unrolled(loop, failed[loop.dimension], tuple(ran.get(loop.dimension, ())))
            for loop in loops if failed.get(loop.dimension)]


def _unrolled(loop: UnrolledLoop, failures: Mapping[int, str], ran: tuple[int, ...]) -> Finding:
    name, lengths = loop.dimension, sorted(failures)
    return Finding(
        "shape-assumption",
        f"the TorchScript export unrolled {loop.describe()}; the ONNX file computes those "
        f"{loop.steps} steps at every length, and the model fails at {name} {_list(lengths)}: "
        f"{_failures(name, lengths, failures)}",
        file=loop.file, line=loop.line, severity=Severity.ERROR,
        fix=("Replace the Python loop over the axis with an operation over the whole axis "
             "(`torch.nn.GRU` for a `GRUCell` stepped in Python, a `cumsum`, a batched "
             "matmul), or `torch.jit.script` the loop so that it exports as an ONNX `Loop`; if "
             f"the model is only meant for {name} {loop.steps}, set `axis-sizes` to it and "
             "document the requirement."),
        details={"dimension": name, "condition": f"{name} must be {loop.steps}",
                 "violating_sizes": [n for n in ran if n != loop.steps],
                 "failed_sizes": lengths, "node": loop.first},
    )


def _likeliest(shapes: list[ConstantShape], failures: Mapping[int, str]) -> list[ConstantShape]:
    """The constants whose node a failure names first (onnxruntime names the failing node),
    then the rest in graph order."""
    text = " ".join(failures.values())
    named = [shape for shape in shapes if shape.node and shape.node in text]
    return (named + [shape for shape in shapes if shape not in named])[:MAX_CONSTANTS]


def _failures(name: str, lengths: Sequence[int], failures: Mapping[int, str]) -> str:
    """What failed at each length, each said once (the sweep's text may name its length)."""
    return "; ".join(failures[length] if f"{name} {length}" in failures[length]
                     else f"at {name} {length}: {failures[length]}" for length in lengths)


def _where(assumption: ShapeAssumption) -> str:
    if assumption.file:
        return f"torch recorded it at {assumption.file}:{assumption.line}"
    if assumption.origin:
        return (f"torch recorded it inside {assumption.origin}, not at a line of your "
                "repository")
    return "torch recorded no line for it"


def _list(lengths: Sequence[int]) -> str:
    return ", ".join(str(length) for length in lengths)
