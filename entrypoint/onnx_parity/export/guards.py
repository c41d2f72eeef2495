"""The program torch.export keeps guards in, and the guards and ranges read from it.

`torch.onnx.export(module, dynamo=True)` exports with `prefer_deferred_runtime_asserts_over_
guards=True`: a guard on a size becomes an assertion node, which the ONNX translation removes,
and nothing of it is left to read. `torch.export.export(..., strict=False)` with the default
keeps it in the program's shape environment (`ExportedProgram._guards_code`, private), and
`torch.onnx.export(that_program)` translates the same graph (measured on torch 2.13). So the
dynamo exporter captures the program here, the way torch.onnx's own non-strict strategy does
(sizes of 0 or 1 kept dynamic, the LSTM/GRU decompositions for dynamic shapes, torch.export's
suggested fixes applied when a dynamic size is specialised), and hands it over.

torch keeps one frame per guard (`ShapeGuard.sloc`): the first one outside its symbolic-shape
code, which for a guard a `view` or `reshape` adds is a frame of torch's reference ops. While
the program is captured, a guard's frame inside torch is replaced by the innermost frame
outside torch (the user's line, or an installed library's), so the finding can name it.
Everything private is read defensively: when it is missing, the guard is read without a line.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import traceback
from collections.abc import Iterator
from typing import Any

from onnx_parity.export.assumptions import RecordedGuard
from onnx_parity.settings import parse_dimension


def capture_program(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    shapes: Any) -> Any:
    """torch.export's program of the module (raises whatever torch.export raises)."""
    import torch

    dims = _as_dims(shapes)
    with _dynamic_patches(dims), _user_frames():
        try:
            return _export(module, args, kwargs, dims)
        except torch._dynamo.exc.UserError as error:
            # A dynamic size the code specialises: torch.onnx applies torch.export's fix (the
            # size becomes static, which the graph check then reports), and so do we.
            try:
                refined = torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(
                    error.msg, dims)
            except Exception:  # no fix torch suggests: its first words say what went wrong
                raise error from None
            return _export(module, args, kwargs, refined)


def recorded_guards(program: Any) -> tuple[tuple[RecordedGuard, ...], dict[str, int]]:
    """The program's guards and its ranges narrower than torch's default, as Python over size
    sources (`L['x'].size()[1]`), and each source's export size."""
    try:
        env = _shape_env(program)
        sources = {symbol: [source.name for source in found]
                   for symbol, found in env.var_to_sources.items() if found}
        # torch 2.13 renames var_to_val (deprecated, with a FutureWarning) backed_var_to_val
        hints = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
        sizes = {name: int(hints[symbol]) for symbol, names in sources.items()
                 for name in names if symbol in hints}
        guards = _guards(env, sources) + _ranges(program, sources)
    except Exception as error:  # private API: a torch without it gives no guards, not a crash
        print(f"--- guards not read ({type(error).__name__}: {error})", flush=True)
        return (), {}
    return tuple(guards), sizes


def _export(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dims: Any) -> Any:
    import torch

    return torch.export.export(module, args, kwargs=kwargs or None, dynamic_shapes=dims,
                               strict=False)


def _as_dims(shapes: Any) -> Any:
    """The configured names as `Dim.DYNAMIC` (torch.onnx renames the axes afterwards), except
    a dimension others derive from and those derived: one named `Dim` and expressions of it
    (`past + 1`), which torch.export keeps linked."""
    import torch

    if not isinstance(shapes, dict):
        return shapes
    linked = _linked_dims([label for axes in shapes.values() if axes for label in axes.values()])
    return {key: ({axis: linked.get(label, torch.export.Dim.DYNAMIC)
                   for axis, label in axes.items()} if axes else None)
            for key, axes in shapes.items()}


def _linked_dims(labels: list[str]) -> dict[str, Any]:
    """label -> torch.export `Dim` for every root of an expression and every expression; a root
    may be as short as its expressions allow (0 for `past + 1`: an empty cache)."""
    import torch

    parsed = {label: linear for label in labels if (linear := parse_dimension(label))}
    smallest: dict[str, int] = {}
    for linear in parsed.values():
        smallest[linear.root] = max(smallest.get(linear.root, 0), linear.smallest_root())
    roots = {root: torch.export.Dim(_identifier(root), min=low) for root, low in smallest.items()}
    derived = {label: linear.scale * roots[linear.root] + linear.offset
               for label, linear in parsed.items()}
    return {**roots, **derived}


def _identifier(label: str) -> str:
    """A dimension name as torch.export names a `Dim` (a Python identifier)."""
    name = "".join(char if char.isalnum() else "_" for char in label)
    return name if name.isidentifier() else f"d_{name}"


@contextlib.contextmanager
def _dynamic_patches(dims: Any) -> Iterator[None]:
    import torch

    config: Any = torch.fx.experimental._config  # untyped: its settings are set by patch()
    with contextlib.ExitStack() as stack:
        # torch.onnx's strategy keeps sizes of 0 and 1 dynamic the same way.
        stack.enter_context(config.patch(backed_size_oblivious=True))
        if dims:
            from torch.export import _patches

            for name in ("register_lstm_while_loop_decomposition",
                         "register_gru_while_loop_decomposition"):
                if hasattr(_patches, name):
                    stack.enter_context(getattr(_patches, name)())
        yield


@contextlib.contextmanager
def _user_frames() -> Iterator[None]:
    """While torch.export runs: a guard's one frame is the innermost outside torch."""
    import torch
    from torch.fx.experimental import symbolic_shapes

    env_class: Any = symbolic_shapes.ShapeEnv  # its private method is wrapped, then restored
    original = getattr(env_class, "_get_stack_summary", None)
    if original is None:
        yield
        return
    inside = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)

    def summary(self: Any, *args: Any, **kwargs: Any) -> Any:
        sloc, extra = original(self, *args, **kwargs)
        frame = getattr(sloc, "framework_loc", None)  # this wrapper's own, or one in torch
        if isinstance(frame, traceback.FrameSummary) and frame.filename.startswith(inside):
            outside = _innermost_outside(inside)
            if outside is not None:
                sloc = type(sloc)(outside, sloc.maybe_user_loc)
        return sloc, extra

    env_class._get_stack_summary = summary
    try:
        yield
    finally:
        env_class._get_stack_summary = original


def _innermost_outside(inside: tuple[str, ...]) -> traceback.FrameSummary | None:
    frame = inspect.currentframe()
    try:
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith(inside) and not name.startswith("<"):
                return traceback.FrameSummary(name, frame.f_lineno, frame.f_code.co_name)
            frame = frame.f_back
    finally:
        del frame
    return None


def _shape_env(program: Any) -> Any:
    from torch.export import exported_program

    find: Any = exported_program._get_shape_env  # untyped and private: read defensively
    env = find(program.graph_module)
    if env is None:
        raise LookupError("the program has no shape environment")
    return env


def _guards(env: Any, sources: dict[Any, list[str]]) -> list[RecordedGuard]:
    """Each guard on input sizes, printed as torch prints `_guards_code`, with its frame."""
    from torch.fx.experimental.symbolic_shapes import ShapeGuardPythonPrinter

    printer = ShapeGuardPythonPrinter(env.var_to_sources, lambda s: s.name, env.var_to_sources)
    found: list[RecordedGuard] = []
    for guard in env.guards:
        if not guard.expr.free_symbols <= set(sources):
            continue
        text = printer.doprint(guard.expr)
        if "L['self']" not in text:
            found.append(RecordedGuard(text, _frame(guard)))
    return found


def _frame(guard: Any) -> tuple[str, int] | None:
    frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    if isinstance(frame, traceback.FrameSummary) and frame.lineno:
        return frame.filename, int(frame.lineno)
    return None


def _ranges(program: Any, sources: dict[Any, list[str]]) -> list[RecordedGuard]:
    """A range constraint as the bounds it sets (a lower one above torch's default of 2)."""
    found: list[RecordedGuard] = []
    for symbol, bounds in program.range_constraints.items():
        if symbol not in sources:
            continue
        source = sources[symbol][0]
        lower, upper = _finite(bounds.lower), _finite(bounds.upper)
        if lower is not None and lower > 2:
            found.append(RecordedGuard(f"{source} >= {lower}"))
        if upper is not None:
            found.append(RecordedGuard(f"{source} <= {upper}"))
    return found


def _finite(bound: Any) -> int | None:
    """A bound as an int; None for torch's infinities (whose `is_finite` says True)."""
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
