"""Evidence that a dimension meant to vary is fixed: one `frozen-dimension` finding per axis.

Evidence comes from three places: the exported graph declares a static size where
`dynamic-axes` asks for a symbolic one; PyTorch runs at batch 1 but not at the export batch;
onnxruntime or the comparison fails at another size than the one exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_parity.export.inspection import ModelFacts, is_symbolic
from onnx_parity.findings import Finding
from onnx_parity.models.binding import BoundInputs
from onnx_parity.settings.schema import ModelSpec
from onnx_parity.verification.outputs import unknown_axis_name


@dataclass
class FrozenEvidence:
    """Everything that says one axis is frozen, gathered into one finding per axis."""

    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, subject: str, line: str) -> None:
        self.lines.setdefault(subject, []).append(line)

    def add_run(self, line: str) -> None:
        """A failure at another batch size belongs to the frozen batch axis, if one is known."""
        subject = next((s for s in self.lines if s.endswith("axis 0") or " axis 0 (" in s),
                       "batch axis")
        self.add(subject, line)

    def findings(self) -> list[Finding]:
        return [
            Finding("frozen-dimension", f"{subject}: {'; '.join(lines)}",
                    evidence="\n".join(lines), details={"subject": subject})
            for subject, lines in self.lines.items()
        ]


def before_export(evidence: str) -> list[Finding]:
    """The model could not be exported, and PyTorch already showed the batch is hard-coded."""
    frozen = FrozenEvidence()
    frozen.add_run(evidence)
    return frozen.findings()


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
                           f"declared dynamic, but the exported model fixes it at {dims[axis]} "
                           f"(shape {_shape(dims)})")
    if len(spec.batch_sizes) > 1:
        for name in bound.names:
            dims = facts.inputs.get(name)
            declared = 0 in spec.dynamic_axes.get(name, {})
            if dims and not declared and not is_symbolic(dims[0]):
                frozen.add(f'"{name}" axis 0',
                           f"static at {dims[0]} (shape {_shape(dims)}) while batch-sizes "
                           f"{list(spec.batch_sizes)} asks for several batch sizes; declare it "
                           f'in `dynamic-axes` ({name} = {{ 0 = "batch" }})')
    return findings


def _shape(dims: tuple[int | str | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
