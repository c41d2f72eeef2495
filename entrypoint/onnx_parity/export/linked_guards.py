"""A guard on an axis derived from another dimension, read in terms of its root.

An axis declared `"past + 1"` is exported as torch.export's derived dimension: its size is
`past + 1` by construction, and torch prints guards on it over its own source
(`L['attention_mask'].size()[1] == 1 + L['past'].size()[1]`). Each such source is replaced by
the expression over a source of its root, so such a guard holds at every length (no
assumption), and any other reads as a condition on the root that the sweep can break.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any, cast

from onnx_parity.settings import Linear, parse_dimension

Axis = tuple[str, int]  # (forward's parameter, axis)


def in_root_terms(tree: ast.expr, names: Mapping[Axis, str]) -> ast.expr:
    """The guard with every derived axis's source written as its expression of the root."""
    roots = {label: axis for axis, label in names.items() if parse_dimension(label) is None}
    linked = {axis: linear for axis, label in names.items()
              if (linear := parse_dimension(label)) is not None and linear.root in roots}
    if not linked:
        return tree

    class Substitute(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> Any:
            axis = source_axis(node)
            if axis is None or axis not in linked:
                return self.generic_visit(node)
            linear = linked[axis]
            return _expression(linear, _source(roots[linear.root]))

    rewritten = Substitute().visit(ast.parse(ast.unparse(tree), mode="eval").body)
    return cast(ast.expr, ast.fix_missing_locations(rewritten))  # visit() is typed as Any


def _source(axis: Axis) -> ast.expr:
    return ast.parse(f"L[{axis[0]!r}].size()[{axis[1]}]", mode="eval").body


def _expression(linear: Linear, root: ast.expr) -> ast.expr:
    scaled: ast.expr = root if linear.scale == 1 else \
        ast.BinOp(ast.Constant(linear.scale), ast.Mult(), root)
    if linear.offset == 0:
        return scaled
    op: ast.operator = ast.Add() if linear.offset > 0 else ast.Sub()
    return ast.BinOp(scaled, op, ast.Constant(abs(linear.offset)))


def source_axis(node: ast.Subscript) -> Axis | None:
    """(parameter, axis) of `L['x'].size()[k]`, or None for any other subscript."""
    call, index = node.value, node.slice
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "size" and isinstance(index, ast.Constant)
            and isinstance(index.value, int)):
        return None
    owner = call.func.value
    if (isinstance(owner, ast.Subscript) and isinstance(owner.value, ast.Name)
            and owner.value.id == "L" and isinstance(owner.slice, ast.Constant)
            and isinstance(owner.slice.value, str)):
        return owner.slice.value, index.value
    return None
