"""Checks of the keys that say what each axis of a deployed tensor is: `batch-axis`, and the
dimension labels of `dynamic-axes` (a name, or an expression of one other name)."""

from __future__ import annotations

import re

from onnx_parity.settings.keys.dimension_names import EXPRESSION_FORMS, Linear, parse_dimension
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    Place,
    did_you_mean,
    dotted,
    non_empty,
    quoted,
    show_value,
    shown,
    wrong_type,
)

AXIS = re.compile(r"[0-9]{1,3}")  # no tensor has 1000 dimensions
NO_BATCH = "none"
BATCH_AXIS_FIX = ('a table of input or output name -> the axis holding the batch (0, 1, ...) or '
                  '"none", e.g. batch-axis = { orig_im_size = "none", x = 1 }')


def dimension_label(label: str, where: str) -> str:
    """The label as written, once it is a name or a well-formed expression of one."""
    try:
        parse_dimension(label)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}. Write a name without spaces, or an expression "
                          f"of one other dimension such as {EXPRESSION_FORMS}.") from None
    return label


def check_roots(declared: dict[str, dict[int, str]], inputs: tuple[str, ...] | None,
                place: Place) -> None:
    """Every expression's root is a plain name that an input declares (so it is exported)."""
    named = {label for name, axes in declared.items() if inputs is None or name in inputs
             for label in axes.values() if parse_dimension(label) is None}
    for name, axes in declared.items():
        for axis, label in axes.items():
            linear = parse_dimension(label)
            if linear is not None and linear.root not in named:
                where = place.at(dotted(dotted("dynamic-axes", name), str(axis)))
                raise ConfigError(
                    f'{where}: "{shown(label)}" derives from "{shown(linear.root)}", which no '
                    f"input declares as a dimension{did_you_mean(linear.root, tuple(named))} "
                    f'Declare the root on an input axis too, e.g. past_key_values.0.key = '
                    f'{{ 2 = "{shown(linear.root)}" }}, or name a declared dimension '
                    f"({quoted(tuple(sorted(named))) if named else 'none yet'})."
                )


def derived_axis(label: str | None, where: str, axis: int) -> None:
    """`axis-sizes` may set a root's lengths only: a derived axis follows its root."""
    linear = parse_dimension(label) if label is not None else None
    if isinstance(linear, Linear):
        raise ConfigError(
            f'{where}: axis {axis} is "{shown(label or "")}", derived from "{linear.root}": its '
            f"lengths follow the root's. Set the sizes on an axis declared as \"{linear.root}\" "
            "instead, and remove this one."
        )


def batch_axis_value(value: object, context: KeyContext) -> dict[str, int | None]:
    """name -> the deployed tensor's batch axis (None: the tensor has no batch axis)."""
    where = context.where
    if not isinstance(value, dict) or not value:
        raise wrong_type(where, value, BATCH_AXIS_FIX)
    return {non_empty(name, where, "an input or output name"):
            _batch_axis(axis, context.place.at(dotted("batch-axis", name)))
            for name, axis in value.items()}


def _batch_axis(value: object, where: str) -> int | None:
    if value == NO_BATCH:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not AXIS.fullmatch(str(value)):
        raise ConfigError(f"{where}: {show_value(value)} is not an axis. Use {BATCH_AXIS_FIX}.")
    return value
