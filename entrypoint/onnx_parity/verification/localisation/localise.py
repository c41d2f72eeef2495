"""Where a failing model's numbers start to differ: the first diverging node, at the user's line.

Runs only for a model that failed on `parity-mismatch` or `nan-or-inf`, on the first cut that
failed, in the model's worker (dynamo's exported program never leaves it). PyTorch's value of
every intermediate node is compared with onnxruntime's value of the same node in the shipped
graph, with the model's own atol/rtol, element by element (verification/compare.py's rule);
divergence.py names the node that introduces the drift. The parity finding then points at that
node's line and says so in one sentence (localised_findings.py); every compared node goes to
`<name>.divergence.json`.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from dataclasses import dataclass

import numpy as np

from onnx_parity.findings import CATALOGUE, Finding
from onnx_parity.models import as_call
from onnx_parity.results import Divergence, NodeCheck, OutputComparison, Repro
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.cuts import CutRun, ort_feed
from onnx_parity.verification.localisation.call_sites import placed_by_calls
from onnx_parity.verification.localisation.divergence import Verdict, feeders, first_divergence
from onnx_parity.verification.localisation.divergence_text import dynamo_hint
from onnx_parity.verification.localisation.reduce import (
    DISABLED,
    PYTORCH,
    Reduced,
    reduce_model,
)
from onnx_parity.verification.localisation.repro import ReproCase, build_repro
from onnx_parity.verification.localisation.request import Localisation
from onnx_parity.verification.localisation.torch_values import (
    LocalisationTimeout,
    fx_values,
    leaf_modules,
    module_values,
    wrapper_prefix,
)
from onnx_parity.verification.node_sources import Origin, dynamo_origin, module_origin
from onnx_parity.verification.onnx_values import (
    LOCALISATION_LEVEL,
    Graph,
    intermediate_values,
    read_graph,
    scope_module,
)
from onnx_parity.verification.runtime import RuntimeFailure


def _needs_dynamo(request: Localisation) -> str:
    """Why localising needs dynamo's program, and whether this model can have one: dynamo is
    named as the way only when it exported the model."""
    if request.spec.export_command is None:
        return dynamo_hint(request.attempts)
    return ("the file comes from `export-command`, and localising a mismatch to a line needs "
            "the tool's own dynamo export: run the check once without `export-command`")


@dataclass(frozen=True)
class Compared:
    """One value on both sides, with where it comes from."""

    value: str
    row: OutputComparison
    origin: Origin
    expected: np.ndarray  # PyTorch's value, and onnxruntime's: what a repro folder is fed
    actual: np.ndarray


@dataclass(frozen=True)
class Localised:
    """What localising found, and the repro folder of the first divergence when it named one."""

    output: str  # the failing output it looked at
    divergence: Divergence | None  # None: only reduced (optimizer drift)
    repro: Repro | None = None
    reduced: Reduced | None = None  # when bisection over the graph found the place instead


@dataclass(frozen=True)
class _Attempt:
    """One localisation under way: what it was asked, the failing cut and output, its start."""

    request: Localisation
    run: CutRun
    output: str
    started: float  # time.perf_counter() when it began: the Divergence's seconds


def deadline_for(timeout_seconds: float, started: float) -> float:
    """The model's timeout less a reserve to write the result: localising must not lose it."""
    return started + timeout_seconds - max(2.0, 0.1 * timeout_seconds)


def localisation_target(findings: list[Finding],
                        failed: list[CutRun]) -> tuple[CutRun, str, bool] | None:
    """The first failing cut and output that a parity or NaN finding reports, else one that
    optimizer-drift reports (True: reduce against the graph with optimizations disabled)."""
    # A mismatch a baked branch or a frozen size explains is not an operator's drift.
    outputs = {f.details.get("output") for f in findings
               if CATALOGUE[f.code].localised and "explained_by" not in f.details}
    drifted = {f.details.get("output") for f in findings if f.code == "optimizer-drift"}
    for wanted, drift in ((outputs, False), (drifted, True)):
        for run in failed:
            for row in run.rows:
                if not row.passed and row.output in wanted:
                    return run, row.output, drift
    return None


def localise(request: Localisation, run: CutRun, output: str, drift: bool = False) -> Localised:
    attempt = _Attempt(request, run, output, time.perf_counter())
    if drift:
        return _reduced(attempt, None, DISABLED)
    graph = read_graph(request.model)
    values, limit = len(graph.values()), request.spec.localise_max_values
    if request.program is not None and values > limit:  # marking them all would not fit
        return _reduced(attempt, _empty(attempt, f"the graph computes {values} values, over "
                                        f"localise-max-values = {limit}"), PYTORCH)
    found = _values(attempt, graph)
    if isinstance(found, str):
        return Localised(output, _empty(attempt, found))
    compared, skipped = found
    if not compared:
        reason = ("no value of the exported graph has a counterpart in PyTorch"
                  if request.program is not None else "the graph names no module scope of a "
                  f"leaf module; {_needs_dynamo(request)}")
        return Localised(attempt.output, _empty(attempt, reason))
    return _judged(attempt, graph, compared, skipped)


def _values(attempt: _Attempt, graph: Graph) -> tuple[list[Compared], int] | str:
    """Both sides' values of the graph's compared points, or why there are none. Localising
    comes after the verdict: nothing it raises may lose what was measured, so the model's own
    code failing when run again (a module refusing forward hooks, a graph rerun past what
    torch recorded) is a reason like the others."""
    request = attempt.request
    try:
        if time.monotonic() > request.deadline:
            raise LocalisationTimeout
        return (_dynamo_values if request.program is not None
                else _module_values)(request, graph, attempt.run)
    except LocalisationTimeout:
        return "stopped to stay within timeout-seconds"
    except RuntimeFailure as error:
        return f"onnxruntime cannot run the graph's values: {error.message}"
    except Exception as error:  # the model's code, run again for its intermediate values
        said = (str(error).strip().splitlines() or [""])[0]
        return ("running PyTorch again for the intermediate values raised "
                f"{type(error).__name__}: {textwrap.shorten(said, 300)}")


def _judged(attempt: _Attempt, graph: Graph, compared: list[Compared],
            skipped: int) -> Localised:
    verdicts = {c.value: Verdict(c.row.passed, c.row.max_abs_diff) for c in compared}
    sources = feeders(graph, verdicts)
    first = first_divergence([c.value for c in compared], verdicts, sources)
    nodes = tuple(_node(c, first is not None and c.value == first.value) for c in compared)
    unlocalised = None
    if first is None:
        unlocalised = _unlocalised(attempt, compared)
    divergence = _divergence(attempt, nodes, skipped, unlocalised)
    if first is None:
        return (_reduced(attempt, divergence, PYTORCH) if attempt.request.program is not None
                else Localised(attempt.output, divergence))
    divergence = dataclasses.replace(divergence, inputs_max_abs_diff=first.inputs_max_abs_diff)
    target = next(c for c in compared if c.value == first.value)
    repro = _repro(attempt, graph, compared, target, sources[first.value])
    return Localised(attempt.output, divergence, repro)


def _unlocalised(attempt: _Attempt, compared: list[Compared]) -> str:
    """Why no node was named. Where dynamo's program gives onnxruntime's value of the failing
    output itself, no node of the file drifts: the program and the model differ, a path the
    export decided (torch.export takes a dynamic size as at least 2, so a branch on an empty
    past, `past_length > 0`, is baked taken)."""
    if attempt.request.program is None:
        return ("every compared value is within the tolerance: the drift comes from code no "
                f"compared value covers; {_needs_dynamo(attempt.request)}")
    output = next((c for c in compared if c.value == attempt.output), None)
    if output is not None and output.row.passed:
        return (f"onnxruntime computes what dynamo's exported program does (`{attempt.output}` "
                f"within the tolerance, max abs diff {output.row.max_abs_diff:.3g}), and the "
                "program differs from the model run as written: the export took another path "
                "than the model does on these inputs (a branch on a size decided at export: "
                "torch.export takes a dynamic size as at least 2, an empty past included)")
    return ("every compared value is within the tolerance: the drift comes from code no "
            "compared value covers")


def _reduced(attempt: _Attempt, divergence: Divergence | None, reference: str) -> Localised:
    reduced = reduce_model(attempt.request, attempt.run, reference)
    return Localised(attempt.output, divergence, reduced.repro if reduced else None, reduced)


def _repro(attempt: _Attempt, graph: Graph, compared: list[Compared], first: Compared,
           boundary: frozenset[str]) -> Repro:
    """The first divergence's repro folder, fed with the values localisation computed."""
    request, cut = attempt.request, attempt.run.cut
    inputs = tuple(name for name in graph.inputs if name not in graph.constants)
    values = {**ort_feed(inputs, request.bound, cut.feed),
              **{c.value: c.actual for c in compared}}
    case = ReproCase(request.spec.name, request.model, graph, first.value, boundary, values,
                     first.expected, cut.size, LOCALISATION_LEVEL, "localisation",
                     origin=first.origin)
    return build_repro(case, request.spec, request.repo)


def _dynamo_values(request: Localisation, graph: Graph,
                   run: CutRun) -> tuple[list[Compared], int]:
    call = as_call(run.cut.feed, request.bound)
    torch_values, outputs = fx_values(request.program, call, request.deadline)
    present = graph.values()
    renamed = dict(zip(outputs, graph.outputs, strict=False))  # output_names rename outputs
    pairs = {name: name if name in present else renamed.get(name) for name in torch_values}
    found = {name: value for name, value in pairs.items() if value}
    onnx = _onnx_values(request, graph, run, list(found.values()))
    producer = graph.producer()
    origins = {value: dynamo_origin(producer[value], request.repo) for value in found.values()}
    unplaced = {value: producer[value] for value, origin in origins.items() if not origin.file}
    if unplaced:  # torch kept no frame of the user's: those that called the node's module
        origins |= placed_by_calls(request.module, call, request.repo, unplaced,
                                   request.deadline)
    compared = _compare(request, run, [
        (value, torch_values[name], onnx[value], origins[value]) for name, value in found.items()
    ], graph)
    return compared, len(torch_values) - len(compared)


def _module_values(request: Localisation, graph: Graph,
                   run: CutRun) -> tuple[list[Compared], int]:
    leaves = leaf_modules(request.module)
    last: dict[str, str] = {}  # module -> the output of the last node in its scope
    for node in graph.nodes:
        scope = scope_module(node.name)
        if scope in leaves and node.outputs:
            last[scope] = node.outputs[0]
    if not last:
        return [], 0
    torch_values = module_values(request.module, as_call(run.cut.feed, request.bound),
                                 set(last))
    onnx = _onnx_values(request, graph, run, [last[name] for name in torch_values])
    triples, prefix = [], wrapper_prefix(request.module)
    for name, output in torch_values.items():
        origin = module_origin(name.removeprefix(prefix), leaves[name], output.callers,
                               request.repo)
        triples.append((last[name], output.value, onnx[last[name]], origin))
    return _compare(request, run, triples, graph), len(leaves) - len(torch_values)


def _onnx_values(request: Localisation, graph: Graph, run: CutRun,
                 wanted: list[str]) -> dict[str, np.ndarray]:
    if time.monotonic() > request.deadline:
        raise LocalisationTimeout
    inputs = tuple(name for name in graph.inputs if name not in graph.constants)
    feed = ort_feed(inputs, request.bound, run.cut.feed)
    return intermediate_values(request.model, wanted, feed)


def _compare(request: Localisation, run: CutRun,
             values: list[tuple[str, np.ndarray, np.ndarray, Origin]],
             graph: Graph) -> list[Compared]:
    """Each pair compared by the model's rule, in graph order; shapes that differ are skipped."""
    order = {value: index for index, node in enumerate(graph.nodes) for value in node.outputs}
    spec = request.spec
    found = []
    for value, torch_value, onnx_value, origin in values:
        if np.shape(torch_value) != np.shape(onnx_value):
            continue
        row = compare_output(value, run.cut.size, torch_value, onnx_value, spec.atol, spec.rtol)
        found.append(Compared(value, row, origin, torch_value, onnx_value))
    return sorted(found, key=lambda c: order.get(c.value, len(order)))


def _node(compared: Compared, first: bool) -> NodeCheck:
    origin, row = compared.origin, compared.row
    return NodeCheck(node=compared.value, op=origin.op, module=origin.module, file=origin.file,
                     line=origin.line, max_abs_diff=row.max_abs_diff,
                     max_rel_diff=row.max_rel_diff, inside=row.passed, first=first,
                     library_frame=origin.library_frame)


def _divergence(attempt: _Attempt, nodes: tuple[NodeCheck, ...], skipped: int,
                unlocalised: str | None) -> Divergence:
    request, cut = attempt.request, attempt.run.cut
    return Divergence(
        exporter=request.exporter, output=attempt.output, batch_size=cut.size,
        input_shapes={name: tuple(int(n) for n in np.shape(array))
                      for name, array in cut.feed.items()},
        optimization=LOCALISATION_LEVEL, atol=request.spec.atol, rtol=request.spec.rtol,
        nodes=nodes, nodes_skipped=max(0, skipped),
        seconds=time.perf_counter() - attempt.started, unlocalised=unlocalised,
    )


def _empty(attempt: _Attempt, reason: str) -> Divergence:
    return _divergence(attempt, (), 0, reason)
