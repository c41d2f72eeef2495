"""A failing model's repro folder: the part of the exported graph that shows the divergence,
with its inputs as the full model computed them and the reference values of its outputs.

Built in the model's worker from what localisation (or the reduction) already holds: the value
that diverges, the compared values it is computed from (the subgraph's inputs), onnxruntime's
values of those on the failing batch, and PyTorch's value of the diverging one. The subgraph is
cut out with onnx's own `onnx.utils.Extractor`, from the graph read without its weights; only
the initializers the subgraph uses are then read from the model's data file. It is run here
once, as repro.py will run it, so the folder records the figure it prints. A folder past
`repro-max-mb` is cut to one sample of the batch (when every array holds the batch on axis 0),
then left without its subgraph and arrays, saying why. Publishing moves it to the output
folder and writes repro.py and REPORT.md beside the files (report/repro/repro_text.py).
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.locations import scrub_paths
from onnx_parity.model_files import ModelFile
from onnx_parity.results import Repro
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.node_sources import Origin, dynamo_origin
from onnx_parity.verification.onnx_values import Graph
from onnx_parity.verification.runtime import RuntimeFailure, open_session, run_session

SUBGRAPH, INPUTS, EXPECTED = "subgraph.onnx", "inputs.npz", "expected.npz"
MB = 1 << 20


@dataclass(frozen=True)
class ReproCase:
    """What one repro folder is made of, all of it already in the worker's memory."""

    name: str  # the model's name: the folder is <name>.repro beside the exported model
    model: ModelFile
    graph: Graph
    target: str  # the value that diverges
    boundary: frozenset[str]  # compared values the subgraph takes as inputs
    values: dict[str, np.ndarray]  # onnxruntime's values of the boundary and graph inputs
    expected: np.ndarray  # the reference's value of the target
    batch_size: int
    optimization: str  # the level the divergence was measured at
    found_by: str  # results.Repro.found_by
    reference: str = "pytorch"  # results.Repro.reference
    # Where localisation placed the target when the graph records no line (a TorchScript
    # node's module: its class's forward).
    origin: Origin | None = None


@dataclass(frozen=True)
class _Files:
    """The arrays written and what running the subgraph on them gave."""

    samples: int
    max_abs_diff: float | None
    reproduces: bool


def build_repro(case: ReproCase, spec: ModelSpec, repo: Path) -> Repro:
    """The folder written into the work folder, and what it holds (never raises for the
    model: a subgraph onnx or onnxruntime cannot make is a folder that says so)."""
    folder = case.model.path.with_name(f"{case.name}.repro")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cut = subgraph_inputs(case.graph, case.target, case.boundary)
    inputs = cut[0]
    base = _repro(case, spec, cut, repo, folder)
    try:
        _extract(case, inputs, folder / SUBGRAPH, repo)
        files = _write_arrays(case, spec, inputs, folder, case.batch_size)
    except (RuntimeFailure, ValueError, KeyError, OSError) as error:
        return _omitted(base, folder, f"the subgraph could not be cut out and run: {error}")
    size = _size(folder)
    if size > base.limit_bytes and _batch_major(case, inputs):
        files = _write_arrays(case, spec, inputs, folder, 1)
        size = _size(folder)
    repro = _measured(base, files, size)
    if size > base.limit_bytes:
        subgraph_mb = (folder / SUBGRAPH).stat().st_size / MB
        return _omitted(repro, folder, f"the subgraph ({subgraph_mb:.1f} MB) and its inputs "
                        f"({size / MB - subgraph_mb:.1f} MB at {repro.samples} sample(s)) are "
                        f"too large to include: over repro-max-mb = {spec.repro_max_mb:g}")
    return repro


def subgraph_inputs(graph: Graph, target: str,
                    boundary: frozenset[str]) -> tuple[tuple[str, ...], frozenset[int]]:
    """The values the subgraph that computes `target` starts from (boundary values it reaches,
    and graph inputs it reaches past them), in graph order, and the indices of its nodes."""
    producer = {value: index for index, node in enumerate(graph.nodes)
                for value in node.outputs if value}
    reached: set[str] = set()
    nodes: set[int] = set()
    stack = [target]
    while stack:
        value = stack.pop()
        if value in graph.constants or value in reached:
            continue
        if value != target and (value in boundary or value not in producer):
            reached.add(value)
            continue
        index = producer[value]
        if index not in nodes:
            nodes.add(index)
            stack += [name for name in graph.nodes[index].inputs if name]
    order = [*graph.inputs, *(v for node in graph.nodes for v in node.outputs)]
    return tuple(value for value in order if value in reached), frozenset(nodes)


def _repro(case: ReproCase, spec: ModelSpec, cut: tuple[tuple[str, ...], frozenset[int]],
           repo: Path, folder: Path) -> Repro:
    inputs, nodes = cut
    origin = dynamo_origin(case.graph.producer()[case.target], repo)
    placed = case.origin if origin.file is None and case.origin else origin
    lines = user_lines(case.graph, nodes, repo) or (
        (f"{placed.file}:{placed.line}",) if placed.file else ())
    return Repro(
        value=case.target, op=origin.op, file=placed.file, line=placed.line,
        found_by=case.found_by, reference=case.reference, optimization=case.optimization,
        batch_size=case.batch_size, samples=case.batch_size, inputs=inputs,
        outputs=(case.target,), nodes=len(nodes), atol=spec.atol, rtol=spec.rtol,
        max_abs_diff=None, reproduces=False, size_bytes=0,
        limit_bytes=int(spec.repro_max_mb * MB), lines=lines,
        platform=platform.platform(), folder=str(folder),
    )


def user_lines(graph: Graph, nodes: Iterable[int], repo: Path) -> tuple[str, ...]:
    """The user's lines (`file:line`) the given nodes come from, in graph order, once each."""
    lines: dict[str, None] = {}
    for index in sorted(nodes):
        origin = dynamo_origin(graph.nodes[index], repo)
        if origin.file:
            lines[f"{origin.file}:{origin.line}"] = None
    return tuple(lines)


def _extract(case: ReproCase, inputs: tuple[str, ...], path: Path, repo: Path) -> None:
    """`subgraph.onnx`: onnx's Extractor on the graph alone, then the weights it uses."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    proto = onnx.load(str(case.model.path), load_external_data=False)
    typed = {name: case.values[name] for name in inputs}
    typed[case.target] = case.expected
    _declare(proto, typed)
    sub = onnx.utils.Extractor(proto).extract_model(list(inputs), [case.target])
    if any(uses_external_data(tensor) for tensor in sub.graph.initializer):
        load_external_data_for_model(sub, str(case.model.path.parent))
    for node in sub.graph.node:  # stack traces hold the machine's paths: keep them relative
        for entry in node.metadata_props:
            entry.value = scrub_paths(entry.value, (repo,))
    onnx.save(sub, str(path))


def _declare(proto: Any, arrays: dict[str, np.ndarray]) -> None:
    """Each input and output of the subgraph typed from its value (any rank, sizes free), so
    the extractor needs no shape inference and one sample fits as well as the batch."""
    import onnx

    graph = proto.graph
    kept = [info for info in graph.value_info if info.name not in arrays]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for name, array in arrays.items():
        element = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
        shape = [f"{name}_{axis}" for axis in range(np.ndim(array))]
        graph.value_info.append(onnx.helper.make_tensor_value_info(name, element, shape))


def _write_arrays(case: ReproCase, spec: ModelSpec, inputs: tuple[str, ...], folder: Path,
                  samples: int) -> _Files:
    """inputs.npz and expected.npz (the first `samples` of the batch), run as repro.py will."""
    arrays = tuple(np.asarray(case.values[name])[:samples] if samples < case.batch_size
                   else np.asarray(case.values[name]) for name in inputs)
    expected = case.expected[:samples] if samples < case.batch_size else case.expected
    np.savez(folder / INPUTS, *arrays)
    np.savez(folder / EXPECTED, expected)
    session = open_session(folder / SUBGRAPH, case.optimization)
    actual = run_session(session, dict(zip(session.input_names, arrays, strict=True)))[0]
    row = compare_output(case.target, samples, expected, actual, spec.atol, spec.rtol)
    return _Files(min(samples, case.batch_size), row.max_abs_diff, not row.passed)


def _batch_major(case: ReproCase, inputs: tuple[str, ...]) -> bool:
    """Every array holds the batch on axis 0, so one sample can be cut from each."""
    arrays = [case.values[name] for name in inputs] + [case.expected]
    return case.batch_size > 1 and all(np.ndim(a) > 0 and np.shape(a)[0] == case.batch_size
                                       for a in arrays)


def _measured(base: Repro, files: _Files, size: int) -> Repro:
    return dataclasses.replace(base, max_abs_diff=files.max_abs_diff,
                               reproduces=files.reproduces, size_bytes=size,
                               samples=files.samples)


def _omitted(repro: Repro, folder: Path, why: str) -> Repro:
    """Only REPORT.md will be written: the files that did not fit (or could not be made) go."""
    for name in (SUBGRAPH, INPUTS, EXPECTED):
        (folder / name).unlink(missing_ok=True)
    return dataclasses.replace(repro, omitted=why, size_bytes=0)


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
