"""Checks of single configuration values: types, ranges, and messages that name the fix.

Shared by settings/loading.py; each check takes the value and `where` (the file, the model,
the key) and raises ConfigError with one paragraph saying what to write instead.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable

from onnx_parity.settings.paths import shown
from onnx_parity.settings.schema import (
    DEFAULT_OPSET,
    DEFAULT_TIMEOUT_SECONDS,
    EXPORTERS,
    MAX_OPSET,
    MIN_OPSET,
    ConfigError,
)

EXPORTER_CHOICES = ("auto", *EXPORTERS)
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


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



def _opset(value: object, where: str) -> int:
    opset = integer(value, where, "an integer opset, e.g. opset = 18")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ConfigError(
            f"{where}: opset {opset} is outside the supported range. Use an opset from "
            f"{MIN_OPSET} to {MAX_OPSET} (the default is {DEFAULT_OPSET})."
        )
    return opset


def _exporters(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return EXPORTERS if _exporter_name(value, where, EXPORTER_CHOICES) == "auto" else (value,)
    if not isinstance(value, list) or not value:
        raise wrong_type(
            where, value, 'exporter = "auto", "dynamo", "torchscript", or a non-empty list '
            'of the two in the order to try, e.g. ["torchscript", "dynamo"]'
        )
    names = tuple(_exporter_name(item, where, EXPORTERS) for item in value)
    no_duplicates(names, where, "list each exporter once")
    return names


def _exporter_name(value: object, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise wrong_type(where, value, f"one of {quoted(choices)}")
    if value not in choices:
        guess = did_you_mean(value, choices)
        raise ConfigError(
            f'{where}: unknown exporter "{shown(value)}"{guess} Use one of {quoted(choices)}.'
        )
    return value


def _tolerance(value: object, where: str) -> float:
    number = finite_number(value, where, "a number, e.g. atol = 1e-5")
    if number < 0:
        raise ConfigError(f"{where}: {number} is negative. Use a tolerance >= 0, e.g. 1e-5.")
    return float(number)


def _batch_sizes(value: object, where: str) -> tuple[int, ...]:
    fix = "a non-empty list of positive integers, e.g. batch-sizes = [1, 4]"
    if not isinstance(value, list) or not value:
        raise wrong_type(where, value, fix)
    sizes = tuple(integer(item, where, fix) for item in value)
    if any(size <= 0 for size in sizes):
        raise ConfigError(f"{where}: {show_value(value)} contains a size below 1. Use {fix}.")
    no_duplicates(sizes, where, "list each batch size once")
    return sizes


def _timeout(value: object, where: str) -> float:
    seconds = finite_number(value, where, "a number of seconds, e.g. timeout-seconds = 600")
    if seconds <= 0:
        raise ConfigError(
            f"{where}: {seconds} is not a positive number of seconds. Use a value > 0, "
            f"e.g. {DEFAULT_TIMEOUT_SECONDS:g}."
        )
    return float(seconds)


def _memory_limit(value: object, where: str) -> int:
    fix = "a positive whole number of megabytes, e.g. memory-limit-mb = 4096 (omit it for no limit)"
    megabytes = integer(value, where, fix)
    if megabytes <= 0:
        raise ConfigError(f"{where}: {megabytes} is not positive. Use {fix}.")
    return megabytes


OVERRIDES: dict[str, tuple[str, Callable[[object, str], object]]] = {
    "opset": ("opset", _opset),
    "exporter": ("exporters", _exporters),
    "atol": ("atol", _tolerance),
    "rtol": ("rtol", _tolerance),
    "batch-sizes": ("batch_sizes", _batch_sizes),
    "timeout-seconds": ("timeout_seconds", _timeout),
    "memory-limit-mb": ("memory_limit_mb", _memory_limit),
}



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


def no_duplicates(items: tuple, where: str, fix: str) -> None:
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
