"""What the export assumed of a declared dimension: torch.export's guards and ranges, read.

torch.export traces forward once; a Python branch on a size (`if t % 8 != 0: pad`) leaves the
branch it took in the graph and only a guard (`(L['x'].size()[1] % 8) == 0`) saying when that
graph is valid. The ONNX file keeps no guard: at a length that breaks it, onnxruntime runs the
graph of the other length, silently. This module turns each guard and each range narrower than
torch's default (`[2, int_oo]`) into a `ShapeAssumption`: the dimension by its configured name,
the condition in the user's terms, a predicate on a length, and the line torch recorded it at.

A guard is read as Python (it is Python: torch prints it so), by `ast`, and evaluated by a small
interpreter of integers, never by `eval`. Its condition is found by evaluating it over a window
of lengths: a multiple, a remainder, a lower or upper bound, a few excluded values, or, when it
is none of those, the guard itself in the configured names.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeGuard, cast

from onnx_parity.export.linked_guards import in_root_terms, source_axis
from onnx_parity.locations import repo_relative, scrub_paths

Kind = Literal["multiple", "remainder", "at-least", "at-most", "excluded", "expression",
               "unread", "uncaptured"]
Axis = tuple[str, int]  # (forward's parameter, axis): what `L['x'].size()[1]` names
# torch.export's own range for a dimension it keeps dynamic: nothing narrower is assumed.
DEFAULT_LOWER = 2
# Lengths a condition is read over: from 2 to the larger of these, and 4x the export length.
WINDOW = 64
MAX_EXCLUDED = 3
MAX_LENGTH = 4096  # a bound past it is read from the range torch solved, not from the guard

Number = int | float
BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
# What torch's guard printer calls: Python's own, `math.*` and torch's symbolic conversions
# (`torch.sym_float(s)`), by their last name.
CALLS: dict[str, Callable[..., Number]] = {
    "max": max, "min": min, "abs": abs, "ceil": math.ceil, "floor": math.floor,
    "trunc": math.trunc, "sym_float": float, "float": float, "sym_int": int, "int": int,
    "round": round, "sqrt": math.sqrt,
}


class UnreadGuard(ValueError):
    """A guard in a form this module does not interpret (kept in the log, not reported)."""


@dataclass(frozen=True)
class RecordedGuard:
    """One guard (or range bound) as torch recorded it, before it is read."""

    text: str  # Python over sources: "(L['x'].size()[1] % 8) == 0"
    frame: tuple[str, int] | None = None  # where torch recorded it (absolute path, line)


@dataclass(frozen=True)
class ShapeAssumption:
    """A condition on one declared dimension the exported graph is valid under, unchecked."""

    dimension: str  # the configured name (`dynamic-axes`)
    kind: Kind
    condition: str  # "time must be a multiple of 8"
    guard: str  # what torch recorded, in the configured names: "time % 8 == 0"
    expression: str  # the guard as recorded (sources), which `holds` evaluates
    sources: tuple[str, ...]  # the sources that carry this dimension
    fixed: tuple[tuple[str, int], ...] = ()  # other sources, at their export sizes
    file: str | None = None  # the user's line, when torch recorded it there
    line: int | None = None
    origin: str | None = None  # where torch recorded it, when not in the repository

    def holds(self, length: int) -> bool:
        """Whether the condition holds at `length`; True where it cannot be evaluated (an
        unread or unrecorded guard, a value the interpreter refuses there): no length is
        said to break what nobody could read."""
        if self.kind in ("unread", "uncaptured"):
            return True
        values = {**dict(self.fixed), **{source: length for source in self.sources}}
        try:
            return bool(evaluate(ast.parse(self.expression, mode="eval").body, values))
        except (UnreadGuard, ZeroDivisionError, KeyError, SyntaxError):
            return True


def read_assumptions(guards: Iterable[RecordedGuard], sizes: Mapping[str, int],
                     names: Mapping[Axis, str], repo: Path) -> tuple[ShapeAssumption, ...]:
    """Every guard narrower than its dimension's declared range, one per condition; `sizes`
    holds each source's export size, `names` each (parameter, axis)'s configured name."""
    found: dict[tuple[str, str], ShapeAssumption] = {}
    for recorded in guards:
        try:
            read = read_guard(recorded, sizes, names, repo)
        except (UnreadGuard, SyntaxError) as error:
            print(f"--- guard not read ({error}): {recorded.text}", flush=True)
            read = [unread_guard(recorded, names, repo)]
        for assumption in read:
            key = (assumption.dimension, assumption.condition)
            if key not in found or (assumption.file and not found[key].file):
                found[key] = assumption
    return tuple(found.values())


def read_guard(recorded: RecordedGuard, sizes: Mapping[str, int], names: Mapping[Axis, str],
               repo: Path) -> list[ShapeAssumption]:
    """The guard's assumption about each dimension it constrains (none when it holds at every
    length in the window, the other dimensions at their export sizes)."""
    tree = in_root_terms(ast.parse(recorded.text, mode="eval").body, names)
    expression = ast.unparse(tree)
    found = sources(tree)
    dimension_of = {source: names[axis] for source, axis in found.items()
                    if axis is not None and axis in names}
    unknown = [source for source in found if source not in dimension_of and source not in sizes]
    if unknown:
        raise UnreadGuard(f"no size for {', '.join(unknown)}")
    read: list[ShapeAssumption] = []
    for dimension in dict.fromkeys(dimension_of.values()):
        mine = tuple(source for source, name in dimension_of.items() if name == dimension)
        fixed = tuple((source, sizes[source]) for source in found if source not in mine)
        export = max((sizes.get(source, DEFAULT_LOWER) for source in mine), default=0)
        shape = classify(_predicate(tree, mine, fixed), max(export, _largest_constant(tree)))
        if shape is None:
            continue
        kind, condition = shape
        named = ast.unparse(_named(tree, dimension_of))
        file, line, origin = _place(recorded.frame, repo)
        read.append(ShapeAssumption(
            dimension, kind, f"{dimension} must {condition or f'satisfy `{named}`'}", named,
            expression, mine, fixed, file, line, origin))
    return read


def unread_guard(recorded: RecordedGuard, names: Mapping[Axis, str],
                 repo: Path) -> ShapeAssumption:
    """A guard this module cannot evaluate, quoted in the user's terms as far as it can be: it
    is still an assumption the ONNX file does not check, so it is reported, never only logged."""
    try:
        tree = in_root_terms(ast.parse(recorded.text, mode="eval").body, names)
        found = sources(tree)
        dimension_of = {source: names[axis] for source, axis in found.items()
                        if axis is not None and axis in names}
        named = ast.unparse(_named(tree, dimension_of))
    except SyntaxError:
        named, dimension_of = recorded.text, {}
    dimension = next(iter(dict.fromkeys(dimension_of.values())), "")
    file, line, origin = _place(recorded.frame, repo)
    return ShapeAssumption(dimension, "unread", f"`{named}`", named, recorded.text,
                           tuple(dimension_of), (), file, line, origin)


def _predicate(tree: ast.expr, mine: tuple[str, ...],
               fixed: tuple[tuple[str, int], ...]) -> Callable[[int], bool]:
    return lambda n: bool(evaluate(tree, {**dict(fixed), **dict.fromkeys(mine, n)}))


def classify(holds: Callable[[int], bool], scale: int) -> tuple[Kind, str] | None:
    """The condition a predicate on a length states, read over the lengths from 2 to four
    times `scale` (the export length, or a larger constant of the guard: a bound), or 64;
    None when it holds at every length there (or at none: the export length breaks it)."""
    lengths = range(DEFAULT_LOWER, min(max(WINDOW, 4 * scale), MAX_LENGTH) + 1)
    good = [n for n in lengths if holds(n)]
    if not good or len(good) == len(lengths):
        return None
    steps = {b - a for a, b in itertools.pairwise(good)}
    if len(steps) == 1 and (step := steps.pop()) > 1 and good[0] - step < lengths[0] and \
            good[-1] + step > lengths[-1]:
        if good[0] % step == 0:
            return "multiple", f"be a multiple of {step}"
        return "remainder", f"leave {good[0] % step} when divided by {step}"
    if good == list(range(good[0], lengths[-1] + 1)):
        return "at-least", f"be at least {good[0]}"
    if good == list(range(lengths[0], good[-1] + 1)):
        return "at-most", f"be at most {good[-1]}"
    kept = set(good)
    bad = [n for n in lengths if n not in kept]
    if len(bad) <= MAX_EXCLUDED:
        return "excluded", f"not be {' or '.join(str(n) for n in bad)}"
    return "expression", ""


def sources(tree: ast.AST) -> dict[str, Axis | None]:
    """Every size source in a guard (`L['x'].size()[1]`), with the axis it names when it is a
    top-level parameter's (a nested input's source names none)."""
    found: dict[str, Axis | None] = {}
    for node in ast.walk(tree):
        if _is_source(node):
            found[ast.unparse(node)] = source_axis(node)
    return found


def evaluate(node: ast.AST, values: Mapping[str, int]) -> Number:
    """The guard's value, sources taken from `values`: numbers (integers, and the floats of
    true division, float constants and `sym_float`), their arithmetic, `math`'s rounding,
    comparisons and boolean logic; nothing else (never `eval`)."""
    if _is_source(node):
        return values[ast.unparse(node)]
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return _arithmetic(node, values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        value = evaluate(node.operand, values)
        return int(not value) if isinstance(node.op, ast.Not) else \
            (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.Compare):
        return int(_compare(node, values))
    if isinstance(node, ast.BoolOp):
        results = (bool(evaluate(value, values)) for value in node.values)
        return int(all(results) if isinstance(node.op, ast.And) else any(results))
    name = _call_name(node)
    if name is not None and isinstance(node, ast.Call):
        return CALLS[name](*(evaluate(arg, values) for arg in node.args))
    raise UnreadGuard(f"cannot evaluate `{ast.unparse(node)}`")


def _arithmetic(node: ast.BinOp, values: Mapping[str, int]) -> Number:
    left, right = evaluate(node.left, values), evaluate(node.right, values)
    try:
        result = BINARY[type(node.op)](left, right)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as error:
        raise UnreadGuard(f"cannot evaluate `{ast.unparse(node)}` ({error})") from None
    if isinstance(result, complex):  # a negative number to a fractional power
        raise UnreadGuard(f"`{ast.unparse(node)}` is not a real number")
    return result


def _call_name(node: ast.AST) -> str | None:
    """`ceil` for `math.ceil(x)`, `sym_float` for `torch.sym_float(x)`, `max` for `max(a, b)`:
    a call this interpreter knows, positional arguments only."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    return name if name in CALLS else None


def _compare(node: ast.Compare, values: Mapping[str, int]) -> bool:
    """A chained comparison of numbers (`a < b <= c`)."""
    left = evaluate(node.left, values)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        if type(op) not in COMPARE:
            raise UnreadGuard(f"cannot evaluate `{ast.unparse(node)}`")
        right = evaluate(comparator, values)
        if not COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _is_source(node: ast.AST) -> TypeGuard[ast.Subscript]:
    """`<L[...]...>.size()[k]`: a size of an input, as torch's guard printer names it."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "size"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int))


def _largest_constant(tree: ast.expr) -> int:
    found = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, int | float)
             and not isinstance(node.value, bool)]
    return int(max(found, default=0))


def _named(tree: ast.expr, dimension_of: Mapping[str, str]) -> ast.expr:
    """The guard in the user's terms: a declared source by its dimension's configured name,
    any other as `x.shape[1]`."""

    class Rename(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            if not _is_source(node):
                return self.generic_visit(node)
            if ast.unparse(node) in dimension_of:
                return ast.Name(dimension_of[ast.unparse(node)], ast.Load())
            axis = source_axis(node)
            return ast.Name(f"{axis[0]}.shape[{axis[1]}]" if axis else ast.unparse(node),
                            ast.Load())

    renamed = Rename().visit(ast.parse(ast.unparse(tree), mode="eval").body)
    return cast(ast.expr, renamed)  # NodeTransformer.visit is typed as returning Any


def _place(frame: tuple[str, int] | None, repo: Path) -> tuple[str | None, int | None,
                                                              str | None]:
    """The user's file and line, or where inside an installed package torch recorded it."""
    if frame is None:
        return None, None, None
    path, line = frame
    file = repo_relative(path, repo)
    if file is not None:
        return file, line, None
    where = scrub_paths(f"{path}:{line}", (repo,))
    return None, None, where.removeprefix("site-packages/").removeprefix("dist-packages/")
