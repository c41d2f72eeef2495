"""Evidence that a dimension meant to vary is fixed: one `frozen-dimension` finding per axis.

Evidence comes from three places: the exported graph declares a static size where
`dynamic-axes` asks for a symbolic one; PyTorch runs at batch 1 but not at the export batch;
onnxruntime or the comparison fails at another size than the one exported (another batch size,
or another length of a declared sequence, time or image axis that the exported file fixes; on
an axis the file keeps symbolic, such a failure is a `length-mismatch` of lengths.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_parity.export import ModelFacts, is_symbolic
from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding
from onnx_parity.locations import NOWHERE, Location
from onnx_parity.models import BoundInputs
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.outputs import unknown_axis_name
from onnx_parity.verification.repeats import FIGURE, merge_texts

BATCH_SUBJECT = "batch axis"
# A declared sequence, time or image axis that works at the export size only.
DIMENSION_FIX = (
    "The graph computes for the export size only: a Python loop or a size read as a Python "
    "number (`for t in range(x.shape[1])`, `int(x.size(1))`) is unrolled or baked in by the "
    "tracer. Compute over the whole axis with tensor ops; `axis-sizes` sets the sizes "
    "checked."
)


@dataclass
class FrozenEvidence:
    """Everything that says one axis is frozen, gathered into one finding per axis."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    # The batch size or length each line is about (None: every size), so that the lines of
    # one failure repeated at several sizes read as one line listing them.
    sizes: dict[str, list[int | None]] = field(default_factory=dict)
    # A fix that names the axis (the `dynamic-axes` entry to add), when one is known.
    fixes: dict[str, str] = field(default_factory=dict)
    # Subjects that `dynamic-axes` declares: their message says "is declared dynamic, but" once.
    declared: set[str] = field(default_factory=set)
    # The user's line that hard-codes the size, when PyTorch's own traceback names it.
    places: dict[str, Location] = field(default_factory=dict)
    details: dict[str, FindingDetails] = field(default_factory=dict)
    # Who a failure at another batch size is about when the graph showed nothing static.
    batch: str = BATCH_SUBJECT
    batch_declared: bool = False
    # How the inputs' batch axes begin a subject (`"x" axis 1`): each input's `batch-axis`.
    batch_axes: tuple[str, ...] = ()

    def add(self, subject: str, line: str, *, declared: bool = False,
            place: Location = NOWHERE, size: int | None = None) -> None:
        self.lines.setdefault(subject, []).append(line)
        self.sizes.setdefault(subject, []).append(size)
        if declared:
            self.declared.add(subject)
        if place != NOWHERE and subject not in self.places:
            self.places[subject] = place

    def add_run(self, line: str, place: Location = NOWHERE, size: int | None = None) -> None:
        """A failure at another batch size belongs to the frozen batch axis, if one is known."""
        subject = next((s for s in self.lines
                        if any(s == axis or s.startswith(f"{axis} (") for axis in self.batch_axes)),
                       None)
        if subject is None:
            self.add(self.batch, line, declared=self.batch_declared, place=place, size=size)
        else:
            self.add(subject, line, place=place, size=size)

    def add_dimension(self, subject: str, line: str, details: FindingDetails,
                      size: int | None = None) -> None:
        """A declared non-batch axis that fails or mismatches at another size."""
        self.add(subject, line, declared=True, size=size)
        self.details.setdefault(subject, {}).update(details)

    def findings(self) -> list[Finding]:
        return [self._finding(subject, self._merged(subject)) for subject in self.lines]

    def _merged(self, subject: str) -> list[str]:
        """The subject's lines, those repeating one failure at several sizes as one."""
        groups: dict[object, list[tuple[int, str]]] = {}
        for index, (line, size) in enumerate(zip(self.lines[subject], self.sizes[subject],
                                                 strict=True)):
            key = index if size is None else tuple(FIGURE.split(line))
            groups.setdefault(key, []).append((size or 0, line))
        merged: list[str] = []
        for items in groups.values():
            text = merge_texts(items) if len(items) > 1 else None
            merged += [text] if text is not None else [line for _, line in items]
        return merged

    def _finding(self, subject: str, lines: list[str]) -> Finding:
        joined = "; ".join(lines)
        message = (f"{subject} is declared dynamic, but {joined}" if subject in self.declared
                   else f"{subject}: {joined}")
        file, line = self.places.get(subject, NOWHERE)
        sizes = [size for size in dict.fromkeys(self.sizes[subject]) if size is not None]
        listed: FindingDetails = ({} if not sizes else {"sizes": sizes}
                                  if subject in self.details else {"batches": sizes})
        fix = self.fixes.get(subject, DIMENSION_FIX if subject in self.details else None)
        return Finding("frozen-dimension", message, file=file, line=line,
                       evidence="\n".join(self.lines[subject]), fix=fix,
                       details={"subject": subject, **self.details.get(subject, {}), **listed})


def for_model(bound: BoundInputs) -> FrozenEvidence:
    """Evidence for this model: a failure at another batch size names its declared batch axis
    (each input's `batch-axis`)."""
    contract = bound.contract
    axes = tuple(f'"{name}" axis {axis}' for name in bound.names
                 if (axis := contract.batch_axis(name)) is not None)
    for name in bound.names:
        label = contract.batch_label(name)
        if label is not None:
            return FrozenEvidence(batch=f'"{name}" axis {contract.batch_axis(name)} ("{label}")',
                                  batch_declared=True, batch_axes=axes)
    return FrozenEvidence(batch_axes=axes)


def before_export(bound: BoundInputs, evidence: str,
                  place: Location = NOWHERE) -> list[Finding]:
    """The model could not be exported, and PyTorch already showed the batch is hard-coded."""
    frozen = for_model(bound)
    frozen.add_run(evidence, place)
    return frozen.findings()


def fixed_by_file(facts: ModelFacts, members: tuple[tuple[str, int], ...]) -> bool:
    """True when the exported graph gives one of a dimension's axes a fixed size: its failures
    at other lengths are then evidence of that, not of a length the graph gets wrong."""
    for name, axis in members:
        dims = facts.inputs.get(name)
        if dims is not None and axis < len(dims) and not is_symbolic(dims[axis]):
            return True
    return False


def declared_axes(facts: ModelFacts, spec: ModelSpec, bound: BoundInputs,
                  frozen: FrozenEvidence) -> list[Finding]:
    """Declared axes must be symbolic in the graph; returns findings for unknown names."""
    findings: list[Finding] = []
    for name, axes in spec.dynamic_axes.items():
        dims = facts.inputs.get(name, facts.outputs.get(name))
        if dims is None:
            findings.append(unknown_axis_name(name, facts))
            continue
        for axis, label in sorted(axes.items()):
            if axis < len(dims) and not is_symbolic(dims[axis]):
                frozen.add(f'"{name}" axis {axis} ("{label}")',
                           f"the exported model fixes it at {dims[axis]} (shape {_shape(dims)})",
                           declared=True)
    findings += [unknown_axis_name(name, facts, "batch-axis") for name in spec.batch_axis
                 if name not in facts.inputs and name not in facts.outputs]
    if len(spec.batch_sizes) > 1:
        for name in bound.names:
            _static_batch(facts, spec, bound, name, frozen)
    return findings


def _static_batch(facts: ModelFacts, spec: ModelSpec, bound: BoundInputs, name: str,
                  frozen: FrozenEvidence) -> None:
    """An input whose undeclared batch axis the graph fixes, while several batch sizes run."""
    dims, axis = facts.inputs.get(name), bound.contract.batch_axis(name)
    if not dims or axis is None or axis >= len(dims) or bound.contract.batch_label(name):
        return
    if not is_symbolic(dims[axis]):
        subject = f'"{name}" axis {axis}'
        frozen.add(subject, f"static at {dims[axis]} (shape {_shape(dims)}) while "
                   f"batch-sizes {list(spec.batch_sizes)} asks for several batch sizes")
        frozen.fixes[subject] = (
            f'Declare it in `dynamic-axes` (`{name} = {{ {axis} = "batch" }}`) and remove '
            "hard-coded sizes from forward (e.g. `x.view(1, -1)` -> `x.flatten(1)` or "
            "`x.view(x.shape[0], -1)`).")


def _shape(dims: tuple[int | str | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
