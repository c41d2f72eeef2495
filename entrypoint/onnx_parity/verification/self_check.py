"""PyTorch against itself: a model that fails on numbers runs forward again on the same batch.

A forward that draws random values (`torch.randn_like` noise, a Dropout left training) gives
other outputs on every run, so onnxruntime cannot match it and no tolerance makes it: the
`parity-mismatch` of such an output would blame the export for what the model does. The
second run is not re-seeded (the generator has moved on since the first, as it does between
two calls in deployment). Where the two runs differ by more than the model's tolerance, the
output gets `nondeterministic-model` instead, naming the random operators the exported graph
holds (with dynamo's aten op and the user's line where the graph records them).

Code built here: `nondeterministic-model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_parity.findings import Finding
from onnx_parity.models import BoundInputs, ReferenceFailure, as_call, run_reference
from onnx_parity.results import OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.cuts import CutRun
from onnx_parity.verification.node_sources import dynamo_origin
from onnx_parity.verification.onnx_values import Graph, GraphNode

# ONNX operators that draw random values at run time.
RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike", "Bernoulli", "Multinomial"})
# Failing cuts run again: one that disagrees is enough; a few more cover a batch-dependent draw.
MAX_RERUNS = 2


@dataclass
class SelfCheck:
    """The outputs PyTorch does not repeat on the same batch, and the findings saying so."""

    findings: list[Finding] = field(default_factory=list)
    outputs: frozenset[str] = frozenset()


def self_check(module: Any, bound: BoundInputs, failed: list[CutRun], spec: ModelSpec,
               graph: Callable[[], Graph], repo: Path) -> SelfCheck:
    """`failed`: the failing cuts at the committed shapes; `graph` is read only when an output
    disagrees with itself."""
    differing: dict[str, OutputComparison] = {}
    for run in failed[:MAX_RERUNS]:
        for row in _rerun(module, bound, run, spec):
            differing.setdefault(row.output, row)
    if not differing:
        return SelfCheck()
    ops = random_ops(graph().nodes, repo)
    findings = [_finding(row, spec, ops) for row in differing.values()]
    return SelfCheck(findings, frozenset(differing))


def _rerun(module: Any, bound: BoundInputs, run: CutRun,
           spec: ModelSpec) -> list[OutputComparison]:
    """The failing outputs of `run` whose second PyTorch run differs from the first."""
    if run.reference is None:
        return []
    try:
        again = run_reference(module, as_call(run.cut.feed, bound))
    except ReferenceFailure:
        return []  # a forward that fails the second time is not this check's to judge
    failing = {row.output for row in run.rows if not row.passed}
    rows: list[OutputComparison] = []
    pairs = zip(run.rows, run.reference.arrays, again.arrays, strict=False)
    for row, first, second in pairs:
        if row.output not in failing:
            continue
        compared = compare_output(row.output, run.cut.size, first, second, spec.atol, spec.rtol)
        if not compared.passed:
            rows.append(compared)
    return rows


@dataclass(frozen=True)
class RandomOp:
    """A random operator of the exported graph, and where dynamo says it came from."""

    op_type: str  # the ONNX operator, e.g. RandomNormalLike
    aten: str | None  # dynamo's aten op, e.g. aten.randn_like.default
    file: str | None
    line: int | None

    def shown(self) -> str:
        source = f" (from {self.aten})" if self.aten and self.aten != self.op_type else ""
        where = f" at {self.file}:{self.line}" if self.file else ""
        return f"{self.op_type}{source}{where}"


def random_ops(nodes: Iterable[GraphNode], repo: Path) -> list[RandomOp]:
    """Each random operator of the graph (a Dropout whose training-mode input is set too)."""
    found: list[RandomOp] = []
    for node in nodes:
        training_dropout = node.op_type == "Dropout" and len(node.inputs) > 2 and node.inputs[2]
        if node.op_type in RANDOM_OPS or training_dropout:
            origin = dynamo_origin(node, repo)
            found.append(RandomOp(node.op_type, origin.op, origin.file, origin.line))
    return found


def _finding(row: OutputComparison, spec: ModelSpec, ops: list[RandomOp]) -> Finding:
    if row.max_abs_diff is None:
        differ = "return different shapes"
    else:
        differ = (f"differ by max abs diff {row.max_abs_diff:.3g} > atol {spec.atol:g} (rtol "
                  f"{spec.rtol:g}), {row.mismatched} of {row.total} elements outside")
    text = (f'output "{row.output}": PyTorch gives other values each time forward runs on the '
            f"same batch: two runs at batch {row.batch_size} {differ}")
    if ops:
        text += "; the exported graph draws random values: " + ", ".join(
            dict.fromkeys(op.shown() for op in ops))
    place = next((op for op in ops if op.file), None)
    return Finding("nondeterministic-model", text,
                   file=place.file if place else None, line=place.line if place else None,
                   details={"output": row.output, "batch_size": row.batch_size})
