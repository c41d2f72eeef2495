"""Checks of single configuration values, the error they raise, and the words of its message.

Each check takes the value and `where` (the file, the model, the key) and raises ConfigError
with one paragraph saying what to write instead. The checks of particular keys (opset,
tolerances, ...) sit beside the keys' declarations in settings/schema.py.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.errors import UserError

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(UserError):
    """The configuration is invalid; the text names the file, the key and the fix."""

    title = "configuration"


def shown(text: str) -> str:
    """User text made safe for a one-line message: control characters appear escaped."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def did_you_mean(word: str, choices: tuple[str, ...]) -> str:
    """'; did you mean "x"?' for the nearest choice, or '.' when none is close."""
    close = nearest(word, choices)
    return f'; did you mean "{close}"?' if close else "."


def nearest(word: str, choices: tuple[str, ...]) -> str | None:
    hyphenated = word.replace("_", "-").lower()
    if hyphenated in choices:
        return hyphenated
    matches = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return matches[0] if matches else None


def integer(value: object, where: str, fix: str) -> int:
    # bool is a subclass of int in Python: `opset = true` must not read as 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(where, value, fix)
    return value


def finite_number(value: object, where: str, fix: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(where, value, fix)
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {value} is not a finite number. Use {fix}.")
    return value


def string(value: object, where: str, fix: str) -> str:
    if not isinstance(value, str):
        raise wrong_type(where, value, fix)
    return value


def non_empty(value: object, where: str, what: str) -> str:
    """A non-empty string (names, patterns, reasons)."""
    text = string(value, where, what)
    if not text.strip():
        raise ConfigError(f"{where}: an empty string is not {what}. Write {what}.")
    return text


def no_duplicates(items: tuple[object, ...], where: str, fix: str) -> None:
    repeated = sorted({shown(str(item)) for item in items if items.count(item) > 1})
    if repeated:
        raise ConfigError(f"{where}: {', '.join(repeated)} appears more than once; {fix}.")


def wrong_type(where: str, value: object, fix: str) -> ConfigError:
    return ConfigError(f"{where}: expected {fix}; got {kind(value)} {show_value(value)}.")


def kind(value: object) -> str:
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
             (list, "an array"), (dict, "a table"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "a date/time")


def show_value(value: object) -> str:
    """A value roughly as written in TOML, cut short."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (str, list, dict, int, float)):
        text = json.dumps(value, default=str, ensure_ascii=False)
    else:
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def quoted(choices: tuple[str, ...]) -> str:
    return ", ".join(f'"{shown(choice)}"' for choice in choices)


def dotted(parent: str, key: str) -> str:
    quoted = key if BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{parent}.{quoted}"


@dataclass(frozen=True)
class Place:
    """Where in the configuration a value sits, for error messages."""

    file: str
    scope: str = ""

    def within(self, scope: str) -> Place:
        return Place(self.file, f"{self.scope}: {scope}" if self.scope else scope)

    def at(self, key: str) -> str:
        return ": ".join(part for part in (self.file, self.scope, f'key "{shown(key)}"') if part)

    def here(self) -> str:
        return ": ".join(part for part in (self.file, self.scope) if part)


@dataclass(frozen=True)
class KeyContext:
    """What a key's check may look at: where the key sits, the repository, the keys before it."""

    place: Place  # the table holding the key
    key: str
    root: Path
    # The values of the keys of the same table read before this one, by TOML key.
    read: Mapping[str, object]

    @property
    def where(self) -> str:
        return self.place.at(self.key)


def check_keys(
    table: Mapping[str, object], valid: tuple[str, ...], place: Place,
    belongs_in_model: tuple[str, ...] = ()
) -> None:
    for key in table:
        if key not in valid:
            raise _unknown_key(key, valid, place, belongs_in_model)


def _unknown_key(
    key: str, valid: tuple[str, ...], place: Place, belongs_in_model: tuple[str, ...]
) -> ConfigError:
    if key in belongs_in_model:
        return ConfigError(
            f"{place.at(key)}: this key belongs inside a [[model]] entry. Move it under the "
            "[[model]] it describes."
        )
    guess = did_you_mean(key, valid)
    return ConfigError(
        f"{place.at(key)}: unknown key{guess} Valid keys here: {', '.join(valid)}."
    )
