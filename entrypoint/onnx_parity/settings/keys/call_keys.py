"""The keys that say how forward is called beyond its tensors: `forward-kwargs`.

A constant argument (`return_dict = false`, `use_cache = true`) is passed to forward in
PyTorch and bound into the exported graph as a constant, never a graph input; so it cannot
also be an input, and it is a TOML scalar (a boolean, a number or a string).
"""

from __future__ import annotations

import math

from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    dotted,
    show_value,
    shown,
    wrong_type,
)

Constant = bool | int | float | str


def forward_kwargs_value(value: object, context: KeyContext) -> dict[str, Constant]:
    where = context.where
    if not isinstance(value, dict) or not value:
        raise wrong_type(where, value, "a table of forward's keyword -> a boolean, number or "
                         "string, e.g. forward-kwargs = { return_dict = false }")
    inputs = context.read.get("inputs")
    taken = {name.partition(".")[0] for name in inputs} if isinstance(inputs, dict) else set()
    return {_keyword(name, where, taken): _constant(raw, context.place.at(
                dotted(context.key, name))) for name, raw in value.items()}


def _keyword(name: str, where: str, taken: set[str]) -> str:
    if not name.isidentifier():
        raise ConfigError(
            f'{where}: "{shown(name)}" is not a Python identifier, so forward cannot take it by '
            "keyword. Name one of forward's parameters, e.g. return_dict."
        )
    if name in taken:
        raise ConfigError(
            f'{where}: "{shown(name)}" is also in `inputs`. An argument is either a sample '
            "(an input of the graph, in `inputs`) or a constant (in `forward-kwargs`), not "
            "both: remove it from one of them."
        )
    return name


def _constant(value: object, where: str) -> Constant:
    fix = "a boolean, a number or a string, e.g. false, 8, 0.5 or \"eager\""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {show_value(value)} is not a finite number. Use {fix}.")
    if isinstance(value, (bool, int, float, str)):
        return value
    raise wrong_type(where, value, f"{fix} (a table, an array or a date cannot be passed as a "
                     "constant: give a tensor as an input instead)")
