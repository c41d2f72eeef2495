"""How a configuration key is declared: `setting(...)` makes a ModelSpec field that carries its
TOML name, type, doc text, check and default (settings/schema.py declares every key with it),
and `Key` is what the loader, the cache and the generated reference read back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, TypeVar, Unpack

from onnx_parity.settings.values import KeyContext

T = TypeVar("T")
Reader = Callable[[object, KeyContext], Any]
DECLARED = "onnx_parity.key"


@dataclass(frozen=True)
class Key:
    """One configuration key, as the loader, the cache and the docs see it."""

    name: str  # as written in TOML
    field: str  # the ModelSpec field it sets
    kind: str  # its TOML type, as the docs show it
    doc: str  # what it means (markdown)
    read: Reader  # the check: the value as written -> the value ModelSpec holds
    default: str | None  # the default as the docs show it; None: required
    model_only: bool  # True: only a [[model]] may set it; else the top level too
    measured: bool  # False: it only judges finished results (the cache does not re-run)
    example: str  # a TOML line, e.g. 'opset = 18'
    top_only: bool = False  # True: only the top level may set it (a field of Settings)


def plain(check: Callable[[object, str], T]) -> Callable[[object, KeyContext], T]:
    """A check that needs only `where`, as a reader."""

    def read(value: object, context: KeyContext) -> T:
        return check(value, context.where)

    return read


class Declaration(TypedDict):
    """What `setting(...)` says of a key besides its name and default (see Key)."""

    kind: str
    doc: str
    check: Reader
    example: str
    shown: NotRequired[str]  # the default as the docs write it, when not the value itself
    model_only: NotRequired[bool]
    measured: NotRequired[bool]


def setting(name: str, default: Any = dataclasses.MISSING, **declared: Unpack[Declaration]) -> Any:
    """A ModelSpec field declared as configuration key `name`.

    `default` is the field's value when the key is left out (none: the key is required).
    """
    key = {"name": name, "kind": declared["kind"], "doc": declared["doc"],
           "read": declared["check"], "example": declared["example"],
           "default": _shown_default(default, declared.get("shown")),
           "model_only": declared.get("model_only", False),
           "measured": declared.get("measured", True)}
    metadata = {DECLARED: key}
    if default is dataclasses.MISSING:
        return field(metadata=metadata)
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


def _shown_default(default: object, shown: str | None) -> str | None:
    if shown is not None or default is dataclasses.MISSING:
        return shown
    if isinstance(default, tuple):
        return "[" + ", ".join(_toml(item) for item in default) + "]"
    return _toml(default)


def _toml(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and 0 < abs(value) < 1e-3:  # 1e-4, not 0.0001
        mantissa, exponent = f"{value:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def choices(values: tuple[str, ...]) -> str:
    return ", ".join(f'`"{value}"`' for value in values)


