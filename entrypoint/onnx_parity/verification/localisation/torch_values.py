"""PyTorch's own intermediate values on one input, named so the ONNX graph's can be matched.

Dynamo: every node of the exported program, run by an FX interpreter (the ONNX values carry the
FX node names). TorchScript: the output of every leaf module, caught by a forward hook (the
ONNX node names carry the module scope), with the frames that called it (node_sources.py finds
the user's line among them).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_parity.locations import live_frames
from onnx_parity.models import Call, one_run, to_array

Frame = tuple[str, int]  # a Python frame's file and line


class LocalisationTimeout(Exception):
    """The localisation ran out of the time the model's timeout leaves it."""


def as_array(value: Any) -> np.ndarray:
    """A tensor as numpy; a complex one as its real view (how ONNX holds it: a last axis of 2)."""
    import torch

    tensor = value.detach().cpu()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return to_array(tensor)  # bfloat16 as ml_dtypes' bfloat16, which .numpy() refuses


def fx_values(program: Any, call: Call, deadline: float, wanted: frozenset[str] | None = None
              ) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """Every tensor an exported-program node computes (or only the `wanted` ones), by node name,
    and the output nodes."""
    import torch

    exported = program.exported_program
    args, kwargs = call
    flat, _ = exported._get_flat_args_with_check(args, kwargs)
    # Without the guards torch.export recorded: the graph is run where the ONNX file is, and a
    # generating model's one-token step (sequence 1) is past the `sequence > 1` guard of an
    # export at 2 tokens, which the graph computes as well.
    graph_module = exported.module(check_guards=False)
    values: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            if time.monotonic() > deadline:
                raise LocalisationTimeout
            result = super().run_node(node)
            if (node.op == "call_function" and isinstance(result, torch.Tensor)
                    and (wanted is None or node.name in wanted)):
                values[node.name] = as_array(result)
            return result

    with torch.no_grad():
        Recorder(graph_module).run(*flat)
    return values, _output_nodes(graph_module)


def _output_nodes(graph_module: Any) -> tuple[str, ...]:
    from torch.utils import _pytree

    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    leaves = _pytree.tree_leaves(output.args[0])
    return tuple(getattr(leaf, "name", "") for leaf in leaves)


def leaf_modules(module: Any) -> dict[str, Any]:
    """Modules without children, by qualified name: their outputs are compared."""
    return {name: child for name, child in module.named_modules()
            if name and not any(True for _ in child.children())}


def wrapper_prefix(module: Any) -> str:
    """The attribute path from the tool's own wrapper of a structured call or a decoding step
    (models/flat_call.py, decoder.py) down to the user's module ("model."), to be left out of
    the module paths a user reads; "" for the user's module itself."""
    prefix = ""
    while type(module).__module__.startswith("onnx_parity."):
        children = list(module.named_children())
        if len(children) != 1:
            break
        name, module = children[0]
        prefix += f"{name}."
    return prefix


@dataclass(frozen=True)
class ModuleOutput:
    """A leaf module's output on one call, and the Python frames that made the call."""

    value: np.ndarray
    callers: tuple[Frame, ...]  # outermost first, torch's own frames included


def module_values(module: Any, call: Call, names: set[str]) -> dict[str, ModuleOutput]:
    """The output of each named module, for those called exactly once with one tensor out."""
    outputs: dict[str, ModuleOutput] = {}
    calls: Counter[str] = Counter()
    _hooked_run(module, call, {name: _recorder(name, outputs, calls) for name in names},
                pre=False)
    return {name: output for name, output in outputs.items() if calls[name] == 1}


def _recorder(name: str, outputs: dict[str, ModuleOutput],
              calls: Counter[str]) -> Callable[..., None]:
    import torch

    def hook(_module: Any, _inputs: Any, output: Any) -> None:
        calls[name] += 1
        if isinstance(output, torch.Tensor):
            # The stack as the hook sees it: the module's caller is still on it, with the line
            # of the call (the user's `self.blocks(x)` for a child of nn.Sequential).
            outputs[name] = ModuleOutput(as_array(output), tuple(live_frames()))

    return hook


def module_callers(module: Any, call: Call, names: set[str]) -> dict[str, tuple[Frame, ...]]:
    """The frames that called each named module, outermost first, for those called exactly
    once (whatever they return): where a graph's node comes from when its own frames are not."""
    callers: dict[str, tuple[Frame, ...]] = {}
    calls: Counter[str] = Counter()

    def caller_of(name: str) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any) -> None:
            calls[name] += 1
            callers[name] = tuple(live_frames())

        return hook

    _hooked_run(module, call, {name: caller_of(name) for name in names}, pre=True)
    return {name: frames for name, frames in callers.items() if calls[name] == 1}


def _hooked_run(module: Any, call: Call, hooks: dict[str, Callable[..., None]],
                pre: bool) -> None:
    """`module` run once on `call` with each named submodule's hook (run before its forward
    when `pre`, after it otherwise), every hook removed after."""
    import torch

    handles = []
    try:
        for name, child in module.named_modules():
            if name in hooks:
                register = (child.register_forward_pre_hook if pre
                            else child.register_forward_hook)
                handles.append(register(hooks[name]))
        args, kwargs = call
        with torch.no_grad(), one_run(module):
            module(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
