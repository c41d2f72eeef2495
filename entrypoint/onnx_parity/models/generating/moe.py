"""Mixture-of-experts decoders: the experts path an export traces, and what the user's runs.

transformers 5 dispatches a `@use_experts_implementation` experts module through
`config._experts_implementation`, read at every call; its default, `grouped_mm`, sorts the
tokens by expert and counts them (`torch.histc`) before a grouped matmul, which neither exporter
translates (dynamo: no ONNX function for `transformers.grouped_mm_fallback`; TorchScript stops
at `aten::histc`). `batched_mm` gathers each (token, expert) pair's weights and multiplies them
in one batch: data-independent, every expert's weights in the graph. An export traces that path
in place of `grouped_mm`; the module is put back as the user built it when the trace ends, so
PyTorch's side of every comparison runs the user's own implementation. `eager` (a Python loop
over the experts a batch hit) is left as the user chose it: its export is wrong, and the finding
says so at its loop's line (`dispatch_loops` here, said by experts_loops.py).

PyTorch's router choices are read where they enter the experts module (`top_k_index`, its
second argument) by a forward hook, at every call the generation check makes
(verification/generation/expert_routing.py counts them).

Not a decoder family of registry.py: an MoE's cache is its attention's (dense, MLA, hybrid),
so its experts are handled beside whichever family reads its cache.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EXPORTED = "batched_mm"  # what an export traces in place of `grouped_mm` (docs/generation.md)
TRANSLATED = "grouped_mm"  # transformers 5's default, which no exporter translates


def _experts(module: Any) -> list[tuple[str, Any]]:
    """The module's dispatching experts modules (`@use_experts_implementation`), by path."""
    named = module.named_modules() if hasattr(module, "named_modules") else ()
    return [(name, child) for name, child in named
            if hasattr(child, "has_gate")
            and hasattr(getattr(child, "config", None), "_experts_implementation_internal")]


def _configs(module: Any) -> list[Any]:
    configs = {id(child.config): child.config for _, child in _experts(module)}
    return list(configs.values())


def implementations(module: Any) -> tuple[str, ...]:
    """The experts implementations the module runs as built (empty: no dispatching experts)."""
    return tuple(sorted({str(config._experts_implementation_internal)
                         for config in _configs(module)}))


def exported_implementations(module: Any) -> tuple[str, ...]:
    """What an export of the module traces (exported_experts)."""
    return tuple(sorted({EXPORTED if name == TRANSLATED else name
                         for name in implementations(module)}))


@contextlib.contextmanager
def exported_experts(module: Any) -> Iterator[None]:
    """Inside the block, every experts module of `module` that runs `grouped_mm` runs
    `batched_mm`; after it, each runs what it ran before, whatever the block raised."""
    configs = [config for config in _configs(module)
               if config._experts_implementation_internal == TRANSLATED]
    for config in configs:
        config._experts_implementation_internal = EXPORTED
    try:
        yield
    finally:
        for config in configs:
            config._experts_implementation_internal = TRANSLATED


@dataclass
class RoutingLog:
    """Each experts module's router choices, one (tokens, top_k) array per call, in call order."""

    experts: dict[str, int]  # the module's path -> its number of experts
    calls: dict[str, list[np.ndarray]] = field(default_factory=dict)


def _indices_position(child: Any) -> tuple[int, str]:
    """Where forward takes the router's indices: its second parameter, by position or name."""
    names = list(inspect.signature(type(child).forward).parameters)  # wraps the original
    return 1, names[2] if len(names) > 2 else "top_k_index"  # names[0] is self


@contextlib.contextmanager
def recorded_routing(module: Any) -> Iterator[RoutingLog]:
    """Every call of the module's experts inside the block, its router's choices recorded. The
    hook is global (torch's module hook, filtered to these experts) because a run leaves a
    settled submodule's own hooks as it settled (models/module_state.py): one registered on
    the module after its first run would be gone after the next."""
    from torch.nn.modules.module import register_module_forward_hook

    experts = _experts(module)
    log = RoutingLog({name: int(child.num_experts) for name, child in experts})
    watched = {id(child): (name, *_indices_position(child)) for name, child in experts}

    def hook(child: Any, args: tuple[Any, ...], kwargs: dict[str, Any], _: Any) -> None:
        if id(child) not in watched:
            return
        name, position, keyword = watched[id(child)]
        chosen = args[position] if len(args) > position else kwargs.get(keyword)
        if chosen is not None:
            log.calls.setdefault(name, []).append(
                chosen.detach().cpu().numpy().reshape(-1, chosen.shape[-1]))

    if not experts:  # a dense model's calls keep torch's fast path (no global hook)
        yield log
        return
    handle = register_module_forward_hook(hook, with_kwargs=True)
    try:
        yield log
    finally:
        handle.remove()


@dataclass(frozen=True)
class DispatchLoop:
    """A Python loop over the experts a batch hit: its module, file and line, the `for` itself."""

    module: str  # the module's path: "model.layers.0.mlp.experts"
    kind: str  # the class's name
    path: str  # the file the forward is defined in, as Python has it
    line: int
    source: str  # the `for` line, stripped
    library_eager: bool  # transformers' own `eager` experts (else a module of the user's)


# A call computing which experts a batch hit: the loop over its result runs once per expert hit.
_HIT = frozenset({"nonzero", "unique", "where", "argwhere"})


def dispatch_loops(module: Any) -> list[DispatchLoop]:
    """Each module class's loop over the experts hit, found once (the first module running it):
    transformers' experts while they run `eager`, and the forward of any module of experts
    (one that counts `num_experts` or holds an attribute named for its experts)."""
    found: dict[tuple[str, int], DispatchLoop] = {}
    dispatching = {id(child) for _, child in _experts(module)}
    for name, child in module.named_modules() if hasattr(module, "named_modules") else ():
        forward = type(child).forward
        library = id(child) in dispatching
        if library and child.config._experts_implementation_internal != "eager":
            continue  # a data-independent implementation runs, not this forward's loop
        if not (library or _holds_experts(child)):
            continue  # a loop over a tensor elsewhere is another finding's (export/review.py)
        loop = _loop_of(getattr(forward, "__wrapped__", forward))
        if loop is not None and loop[:2] not in found:
            found[loop[:2]] = DispatchLoop(name, type(child).__name__, *loop, library)
    return list(found.values())


def _holds_experts(child: Any) -> bool:
    """Not cached: a cache keyed by the module would keep the user's weights alive after the
    worker frees them (the 2.4 GB model's int8 step peaked 2.4 GB higher)."""
    names = [*vars(child), *getattr(child, "_modules", {}), *getattr(child, "_parameters", {})]
    return any("expert" in name.lower() for name in names)


def _loop_of(function: Any) -> tuple[str, int, str] | None:
    """The first `for` of the function iterating a name it assigned from a call in _HIT."""
    import ast
    import textwrap

    try:
        lines, first = inspect.getsourcelines(function)
        path = inspect.getsourcefile(function)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):  # no source (a notebook's class, a builtin)
        return None
    hits = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and _calls_hit(node.value) for target in node.targets if isinstance(target, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id in hits:
            return path or "", first + node.lineno - 1, lines[node.lineno - 1].strip()
    return None


def _calls_hit(value: Any) -> bool:
    import ast

    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
        node.func, "id", None)) in _HIT for node in ast.walk(value))
