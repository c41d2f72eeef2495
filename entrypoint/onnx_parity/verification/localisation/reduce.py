"""When per-node localisation cannot say: reduce the failing model by bisection over its graph.

Localisation marks every intermediate value as an output and runs with optimizations disabled,
so it cannot see a drift only the optimized graph has (`optimizer-drift`), and on a large model
the values marked at once do not fit in memory (`localise-max-values`). The reduction instead
runs prefixes of the graph: the nodes up to one value, cut out with onnx's Extractor (beside
the model, so its weights stay in the model's data file) and run at the configured optimization
level. A prefix fails when its output is outside the model's tolerance against PyTorch's value
at that point (a value dynamo maps to an FX node), or, for optimizer drift, against the same
prefix with graph optimizations disabled. Bisection over the candidate values in graph order
finds the earliest failing prefix in about log2(values) runs, each within the model's deadline;
the repro folder then holds the nodes between the last passing value and the first failing one,
fed with the values the full model computed at the configured level (for optimizer drift, the
whole failing prefix, fed with the graph's inputs: the rewrite that drifts lies inside it).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.finding_details import Reduction
from onnx_parity.findings import Finding
from onnx_parity.models import as_call
from onnx_parity.results import Repro
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.cuts import CutRun, ort_feed
from onnx_parity.verification.localisation.repro import ReproCase, build_repro, subgraph_inputs
from onnx_parity.verification.localisation.request import Localisation
from onnx_parity.verification.localisation.torch_values import LocalisationTimeout, fx_values
from onnx_parity.verification.node_sources import dynamo_origin
from onnx_parity.verification.onnx_values import Graph, intermediate_values, read_graph
from onnx_parity.verification.runtime import RuntimeFailure, open_session, run_session

PYTORCH, DISABLED = "pytorch", "optimizations-disabled"
FOUND_BY = {PYTORCH: "bisection", DISABLED: "optimizer-bisection"}


@dataclass(frozen=True)
class Reduced:
    """Where the earliest failing prefix ends, and its repro folder."""

    value: str
    op: str | None
    file: str | None  # the user's line of the value
    line: int | None
    max_abs_diff: float | None
    level: str
    prefixes_run: int
    reference: str
    repro: Repro | None

    @property
    def lines(self) -> tuple[str, ...]:
        """The user's lines of the nodes the repro folder holds."""
        return self.repro.lines if self.repro else ()


@dataclass(frozen=True)
class _Verdict:
    failed: bool
    expected: np.ndarray
    max_abs_diff: float | None


class _Prefixes:
    """Runs the prefix of the graph that ends at a value, and judges it."""

    def __init__(self, request: Localisation, run: CutRun, graph: Graph, reference: str):
        import onnx

        self.request, self.run, self.graph, self.reference = request, run, graph, reference
        self.proto = onnx.load(str(request.model.path), load_external_data=False)
        self.inputs = tuple(name for name in graph.inputs if name not in graph.constants)
        self.feed = ort_feed(self.inputs, request.bound, run.cut.feed)
        self.runs = 0
        self.verdicts: dict[str, _Verdict] = {}

    def fails(self, value: str) -> bool:
        if value not in self.verdicts:
            self.verdicts[value] = self._judge(value)
        return self.verdicts[value].failed

    def _judge(self, value: str) -> _Verdict:
        if time.monotonic() > self.request.deadline:
            raise LocalisationTimeout
        self.runs += 1
        level = self.request.spec.runtime_optimization
        actual = self._prefix(value, level)
        if self.reference == PYTORCH:
            call = as_call(self.run.cut.feed, self.request.bound)
            expected = fx_values(self.request.program, call, self.request.deadline,
                                 frozenset({value}))[0][value]
        else:
            expected = self._prefix(value, "disabled")
        spec = self.request.spec
        row = compare_output(value, self.run.cut.size, expected, actual, spec.atol, spec.rtol)
        return _Verdict(not row.passed, expected, row.max_abs_diff)

    def _prefix(self, value: str, level: str) -> np.ndarray:
        """onnxruntime's value of the prefix ending at `value`, saved beside the model."""
        import onnx

        inputs, _ = subgraph_inputs(self.graph, value, frozenset())
        known = {info.name for info in (*self.proto.graph.value_info, *self.proto.graph.input,
                                        *self.proto.graph.output)}
        if value not in known:
            self.proto.graph.value_info.append(onnx.ValueInfoProto(name=value))
        sub = onnx.utils.Extractor(self.proto).extract_model(list(inputs), [value])
        path = self.request.model.path.with_name(f".{self.request.model.path.stem}.prefix.onnx")
        try:
            onnx.save(sub, str(path))
            session = open_session(path, level)
        finally:
            path.unlink(missing_ok=True)
        return run_session(session, {name: self.feed[name] for name in session.input_names})[0]


def reduce_model(request: Localisation, run: CutRun, reference: str) -> Reduced | None:
    """The earliest failing prefix and its repro folder; None when no prefix fails (or the
    graph has no value to bisect over, or the time ran out)."""
    graph = read_graph(request.model)
    candidates = _candidates(request, graph, reference)
    prefixes = _Prefixes(request, run, graph, reference)
    try:
        place = _bisect(candidates, prefixes.fails)
    except (LocalisationTimeout, RuntimeFailure, ValueError, KeyError):
        return None
    if place is None:
        return None
    last, first = place
    verdict = prefixes.verdicts[first]
    level = request.spec.runtime_optimization
    repro = _repro(request, run, graph, (last, first), verdict, reference)
    origin = dynamo_origin(graph.producer()[first], request.repo)
    return Reduced(first, origin.op, origin.file, origin.line, verdict.max_abs_diff, level,
                   prefixes.runs, reference, repro)


def _candidates(request: Localisation, graph: Graph, reference: str) -> list[str]:
    """Values in graph order a prefix may end at: against PyTorch, those dynamo maps to an FX
    node (the same name); against "disabled", every float value a node computes."""
    values = [value for node in graph.nodes for value in node.outputs if value]
    if reference == PYTORCH:
        if request.program is None:
            return []
        names = {node.name for node in request.program.exported_program.graph.nodes
                 if node.op == "call_function"}
        return [value for value in values if value in names]
    return values


def _bisect(candidates: list[str], fails: Any) -> tuple[str | None, str] | None:
    """(the last passing value or None, the first failing one), assuming a prefix that fails
    keeps failing further on (drift is inherited); None when even the last one passes."""
    if not candidates or not fails(candidates[-1]):
        return None
    low, high = -1, len(candidates) - 1  # low passes (-1: the graph's inputs), high fails
    while high - low > 1:
        middle = (low + high) // 2
        if fails(candidates[middle]):
            high = middle
        else:
            low = middle
    return (candidates[low] if low >= 0 else None), candidates[high]


def _repro(request: Localisation, run: CutRun, graph: Graph, place: tuple[str | None, str],
           verdict: _Verdict, reference: str) -> Repro | None:
    """The nodes after the last passing value up to the first failing one; for optimizer
    drift, the whole failing prefix from the graph's inputs: a rewrite spans several nodes
    (a fused Div and Mul), so nodes cut at the last passing value may leave it outside, fed
    with what it already computed, and not change at "disabled" on their own."""
    last, first = place
    order = {value: index for index, node in enumerate(graph.nodes) for value in node.outputs}
    start = order[last] if last is not None and reference == PYTORCH else -1
    before = frozenset(value for node in graph.nodes[: start + 1] for value in node.outputs)
    inputs, _ = subgraph_inputs(graph, first, before)
    level = request.spec.runtime_optimization
    graph_inputs = tuple(name for name in graph.inputs if name not in graph.constants)
    feed = ort_feed(graph_inputs, request.bound, run.cut.feed)
    wanted = [value for value in inputs if value not in feed]
    try:
        computed = intermediate_values(request.model, wanted, feed, level) if wanted else {}
    except RuntimeFailure:
        return None
    case = ReproCase(request.spec.name, request.model, graph, first, before,
                     {**feed, **computed}, verdict.expected, run.cut.size, level,
                     FOUND_BY[reference], reference)
    return build_repro(case, request.spec, request.repo)


def attach_reduction(findings: list[Finding], output: str, reduced: Reduced,
                     codes: frozenset[str]) -> list[Finding]:
    """The failing finding of `output` points at the place and says how it was found."""
    return [_attached(f, reduced)
            if f.code in codes and f.details.get("output") == output else f
            for f in findings]


def _attached(finding: Finding, reduced: Reduced) -> Finding:
    file, line, op, lines = reduced.file, reduced.line, reduced.op or "", reduced.lines
    where = f"`{file}:{line}`" if file else f"value `{reduced.value}`"
    against = ("PyTorch's value there" if reduced.reference == PYTORCH
               else "the same prefix with graph optimizations disabled")
    note = (f"Reduced by bisection over the graph's order ({reduced.prefixes_run} prefixes run "
            f'at "{reduced.level}", each against {against}): the earliest failing prefix ends '
            f"at {where} (`{op.removesuffix('.default')}`), max abs diff "
            f"{_e(reduced.max_abs_diff)}")
    if lines:
        note += "; the nodes before it come from " + ", ".join(f"`{x}`" for x in lines)
    details: Reduction = {
        "found_by": FOUND_BY[reduced.reference], "value": reduced.value, "op": op or None,
        "file": file, "line": line, "max_abs_diff": reduced.max_abs_diff,
        "level": reduced.level, "prefixes_run": reduced.prefixes_run, "lines": list(lines),
    }
    return dataclasses.replace(finding, message=f"{finding.message.rstrip('.')}. {note}.",
                               file=file or finding.file, line=line if file else finding.line,
                               details={**finding.details, "reduction": details})


def _e(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2e}"
