"""dynamo's nodes that name no line of the user's, placed by the frames that called their module.

torch records a node's frames only in functions named `forward`. A module of the user's reached
through a function of another name (`forward = run_blocks`, a library model's `forward` calling
a method the user's subclass overrides) then leaves no frame of the repository on the node,
where TorchScript's hook sees the line. Those nodes' modules are run once more under a forward
pre-hook (torch_values.module_callers) and placed by node_sources.py's one rule over the frames
that called them and the node's own. Only a model with a module class defined in the
repository is run again: a library's model or a bare container has no line of the user's to
find. The names are a better place, never a result: whatever the run raises leaves the nodes
as they were.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

from onnx_parity.locations import repo_relative
from onnx_parity.models import Call
from onnx_parity.verification.localisation.torch_values import module_callers, wrapper_prefix
from onnx_parity.verification.node_sources import Origin, dynamo_origin
from onnx_parity.verification.onnx_values import GraphNode, module_and_op


def placed_by_calls(module: Any, call: Call, repo: Path, unplaced: dict[str, GraphNode],
                    deadline: float) -> dict[str, Origin]:
    """The origin of each unplaced value (by ONNX value name) that its module's callers place."""
    prefix = wrapper_prefix(module)
    modules = {value: prefix + name for value, node in unplaced.items()
               if (name := module_and_op(node.namespace)[0])}
    if not modules or time.monotonic() > deadline or not defines_modules(module, repo):
        return {}
    try:
        callers = module_callers(module, call, set(modules.values()))
    except Exception:  # the model's code, run again: only a better name is lost
        return {}
    placed = {value: dynamo_origin(unplaced[value], repo, callers[name])
              for value, name in modules.items() if name in callers}
    return {value: origin for value, origin in placed.items() if origin.file is not None}


def defines_modules(module: Any, repo: Path) -> bool:
    """Whether a module class of the model is defined in the repository."""
    for kind in {type(child) for child in module.modules()}:
        try:
            path = inspect.getsourcefile(kind)
        except (TypeError, OSError):  # a built-in or a class with no file
            continue
        if path is not None and repo_relative(path, repo) is not None:
            return True
    return False
