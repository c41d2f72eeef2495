"""The exported graph's own values: its nodes in order, where each came from, and onnxruntime's
value of any of them on one input.

Intermediate values are read by adding them as graph outputs of the model that was shipped.
Graph optimizations are disabled for that run: at higher levels onnxruntime fuses nodes and the
values inside a fusion no longer exist (the level is recorded with the figures).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from onnx_parity.model_files import ModelFile
from onnx_parity.verification.runtime import open_session, run_session

LOCALISATION_LEVEL = "disabled"
NAMESPACE_KEY = "namespace"
STACK_KEY = "pkg.torch.onnx.stack_trace"
# A dynamo namespace: `: pkg.Model/blocks.0: pkg.Block/linear: aten.linear.default`, one
# `name: class` per module from the root, then the FX node and its aten op.
SEGMENT = re.compile(r"^\s*([^:]*):\s*(.*)$")
# The modules the tool wraps a model in to export it (a structured call, a decoding step): a
# path inside one names the user's module without the wrapper's attribute.
WRAPPERS = "onnx_parity."


@dataclass(frozen=True)
class GraphNode:
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    namespace: str | None  # dynamo only
    stack_trace: str | None  # dynamo only: the frames the value was computed in


@dataclass(frozen=True)
class Graph:
    nodes: tuple[GraphNode, ...]
    inputs: tuple[str, ...]  # the graph's inputs, in order
    outputs: tuple[str, ...]  # the graph's outputs, in order
    constants: frozenset[str]  # initializers: exact on both sides

    def producer(self) -> dict[str, GraphNode]:
        return {value: node for node in self.nodes for value in node.outputs if value}

    def values(self) -> set[str]:
        return {value for node in self.nodes for value in node.outputs if value}


def read_graph(model: ModelFile) -> Graph:
    import onnx

    proto = onnx.load(str(model.path), load_external_data=False)  # the graph, not the weights
    return Graph(
        nodes=tuple(_node(node) for node in proto.graph.node),
        inputs=tuple(value.name for value in proto.graph.input),
        outputs=tuple(value.name for value in proto.graph.output),
        constants=frozenset(tensor.name for tensor in proto.graph.initializer),
    )


def _node(node: object) -> GraphNode:
    metadata = {entry.key: entry.value for entry in getattr(node, "metadata_props", ())}
    return GraphNode(
        name=str(getattr(node, "name", "")), op_type=str(getattr(node, "op_type", "")),
        inputs=tuple(getattr(node, "input", ())), outputs=tuple(getattr(node, "output", ())),
        namespace=metadata.get(NAMESPACE_KEY), stack_trace=metadata.get(STACK_KEY),
    )


def module_and_op(namespace: str | None) -> tuple[str | None, str | None]:
    """(`blocks.0.lin`, `aten.linear.default`) from a dynamo namespace; None where absent."""
    if not namespace:
        return None, None
    segments = [SEGMENT.match(part) for part in namespace.split("/")]
    parts = [(m.group(1).strip(), m.group(2).strip()) for m in segments if m]
    if not parts:
        return None, None
    op = parts[-1][1] or None
    modules = [name for name, _ in parts[1:-1] if name]
    wrapper = [name for name, kind in parts[:-1] if kind.startswith(WRAPPERS)]
    if wrapper and modules:  # the user's module inside the tool's own wrapper (flat_call.py)
        inner = next((name for name, kind in parts[1:-1] if not kind.startswith(WRAPPERS)), "")
        return (modules[-1].removeprefix(inner).lstrip(".") or None), op
    return (modules[-1] if modules else None), op


def intermediate_values(model: ModelFile, wanted: list[str], feed: dict[str, np.ndarray],
                        level: str = LOCALISATION_LEVEL) -> dict[str, np.ndarray]:
    """onnxruntime's value of each wanted value (graph outputs too) on `feed`, optimizations off
    (the reduction asks for a few values at the configured level).

    The graph with those outputs added is saved beside the model, so a model with external
    data keeps reading its weights from the data file it names: they are never loaded here."""
    import onnx

    proto = onnx.load(str(model.path), load_external_data=False)
    present = {value.name for value in proto.graph.output}
    for name in wanted:
        if name not in present:
            proto.graph.output.append(onnx.ValueInfoProto(name=name))
            present.add(name)
    values_model = model.path.with_name(f".{model.path.stem}.values.onnx")
    try:
        onnx.save(proto, str(values_model))
        session = open_session(values_model, level)
    finally:
        values_model.unlink(missing_ok=True)
    names = session.output_names
    values = run_session(session, {name: feed[name] for name in session.input_names})
    return dict(zip(names, values, strict=True))


def scope_module(node_name: str) -> str | None:
    """The module path a TorchScript node name carries: `/enc/layers.0/attn/q/Gemm` ->
    `enc.layers.0.attn.q`; a container's child repeats its name (`/out/out.0/Gemm` -> `out.0`)."""
    if not node_name.startswith("/"):
        return None
    path: list[str] = []
    for segment in node_name.strip("/").split("/")[:-1]:
        if path and segment.startswith(path[-1] + "."):
            path[-1] = segment
        else:
            path.append(segment)
    return ".".join(path) or None
