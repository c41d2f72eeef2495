"""The validated configuration: frozen values, built once, passed to every later stage.

A key that may be set at the top level and overridden in a `[[model]]` is declared once, as a
field of `ModelSpec` made by `setting(...)`: its TOML name, its default and its check. The
loader, the list of valid keys and the defaults all come from those fields, so a new key of
this kind is one line here (and its row in the README's table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from onnx_parity.settings.values import (
    ConfigError,
    did_you_mean,
    finite_number,
    integer,
    no_duplicates,
    quoted,
    show_value,
    shown,
    wrong_type,
)

T = TypeVar("T")
Check = Callable[[object, str], Any]

EXPORTERS = ("dynamo", "torchscript")
EXPORTER_CHOICES = ("auto", *EXPORTERS)
DEFAULT_OPSET = 18
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4
DEFAULT_BATCH_SIZES = (1, 4)
DEFAULT_TIMEOUT_SECONDS = 600.0
MIN_OPSET = 7
MAX_OPSET = 23
VARIANTS = ("int8-dynamic", "int8-static", "fp16")
CALIBRATIONS = ("minmax", "entropy", "percentile")
# onnxruntime's graph optimization levels, lowest first; "all" is onnxruntime's own default.
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
DEFAULT_OPTIMIZATION = "all"
DEFAULT_DRIFT_WARNING_RATIO = 10.0


# ---------------------------------------------------------------------------------------------
# Checks of the keys declared below


def opset_value(value: object, where: str) -> int:
    opset = integer(value, where, "an integer opset, e.g. opset = 18")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ConfigError(
            f"{where}: opset {opset} is outside the supported range. Use an opset from "
            f"{MIN_OPSET} to {MAX_OPSET} (the default is {DEFAULT_OPSET})."
        )
    return opset


def exporters_value(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        name = _choice(value, where, EXPORTER_CHOICES, "exporter")
        return EXPORTERS if name == "auto" else (name,)
    if not isinstance(value, list) or not value:
        raise wrong_type(
            where, value, 'exporter = "auto", "dynamo", "torchscript", or a non-empty list '
            'of the two in the order to try, e.g. ["torchscript", "dynamo"]'
        )
    names = tuple(_choice(item, where, EXPORTERS, "exporter") for item in value)
    no_duplicates(names, where, "list each exporter once")
    return names


def tolerance_value(value: object, where: str) -> float:
    number = finite_number(value, where, "a number, e.g. atol = 1e-5")
    if number < 0:
        raise ConfigError(f"{where}: {number} is negative. Use a tolerance >= 0, e.g. 1e-5.")
    return float(number)


def batch_sizes_value(value: object, where: str) -> tuple[int, ...]:
    fix = "a non-empty list of positive integers, e.g. batch-sizes = [1, 4]"
    if not isinstance(value, list) or not value:
        raise wrong_type(where, value, fix)
    sizes = tuple(integer(item, where, fix) for item in value)
    if any(size <= 0 for size in sizes):
        raise ConfigError(f"{where}: {show_value(value)} contains a size below 1. Use {fix}.")
    no_duplicates(sizes, where, "list each batch size once")
    return sizes


def timeout_value(value: object, where: str) -> float:
    seconds = finite_number(value, where, "a number of seconds, e.g. timeout-seconds = 600")
    if seconds <= 0:
        raise ConfigError(
            f"{where}: {seconds} is not a positive number of seconds. Use a value > 0, "
            f"e.g. {DEFAULT_TIMEOUT_SECONDS:g}."
        )
    return float(seconds)


def memory_limit_value(value: object, where: str) -> int:
    fix = "a positive whole number of megabytes, e.g. memory-limit-mb = 4096 (omit it for no limit)"
    megabytes = integer(value, where, fix)
    if megabytes <= 0:
        raise ConfigError(f"{where}: {megabytes} is not positive. Use {fix}.")
    return megabytes


def variants_value(value: object, where: str) -> tuple[str, ...]:
    fix = (f'a list of deployment variants, e.g. variants = ["int8-dynamic", "fp16"] (any of '
           f"{quoted(VARIANTS)})")
    if not isinstance(value, list):
        raise wrong_type(where, value, fix)
    names = tuple(_choice(item, where, VARIANTS, "deployment variant") for item in value)
    no_duplicates(names, where, "list each variant once")
    return names


def calibration_value(value: object, where: str) -> str:
    return _choice(value, where, CALIBRATIONS, "calibration method")


def _choice(value: object, where: str, choices: tuple[str, ...], what: str,
            why: str = "") -> str:
    """One of `choices`, else a message with the nearest one; `why` explains them, e.g. " (...)"."""
    if not isinstance(value, str):
        raise wrong_type(where, value, f"one of {quoted(choices)}")
    if value not in choices:
        raise ConfigError(f'{where}: unknown {what} "{shown(value)}"'
                          f"{did_you_mean(value, choices)} Use one of {quoted(choices)}{why}.")
    return value


def sqnr_value(value: object, where: str) -> float:
    return float(finite_number(value, where, "a number of decibels, e.g. min-sqnr-db = 25"))


def agreement_value(value: object, where: str) -> float:
    share = finite_number(value, where, "a share between 0 and 1, e.g. min-top1-agreement = 0.99")
    if not 0 <= share <= 1:
        raise ConfigError(f"{where}: {share} is not between 0 and 1. Write the share of samples "
                          "whose top-1 class must agree, e.g. min-top1-agreement = 0.99.")
    return float(share)


def optimization_value(value: object, where: str) -> str:
    return _choice(value, where, OPTIMIZATION_LEVELS, "optimization level",
                   f" (onnxruntime's graph optimization level; the default "
                   f'"{DEFAULT_OPTIMIZATION}" is what a deployment gets unless it sets another)')


def drift_ratio_value(value: object, where: str) -> float:
    number = finite_number(value, where, "a number, e.g. drift-warning-ratio = 10")
    if number < 1:
        raise ConfigError(
            f"{where}: {number} is below 1. Use how many times the max abs diff may grow over "
            f"the baseline before a drift-regression warning, e.g. {DEFAULT_DRIFT_WARNING_RATIO:g}."
        )
    return float(number)


# ---------------------------------------------------------------------------------------------
# The settings


def setting(key: str, default: T, check: Check) -> T:
    """A ModelSpec field settable at the top level and per model, as TOML key `key`."""
    return field(default=default, metadata={"key": key, "check": check})


@dataclass(frozen=True)
class Overridable:
    """One key settable at the top level and per model: its TOML name and ModelSpec field."""

    key: str
    field: str
    check: Check


@dataclass(frozen=True)
class AllowWarning:
    match: str
    reason: str


@dataclass(frozen=True)
class ModelSpec:
    """One `[[model]]` entry with the top-level defaults applied and paths resolved."""

    name: str
    factory: str
    # Absolute paths, each checked to lie inside the repository.
    weights: Path | None
    # Either input name -> sample file, or one bundle (.npz/.pt file or Model Zoo folder).
    inputs: dict[str, Path] | Path
    outputs: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]
    allow_warnings: tuple[AllowWarning, ...]
    # Settable at the top level, overridden per model (see the module docstring).
    opset: int = setting("opset", DEFAULT_OPSET, opset_value)
    exporters: tuple[str, ...] = setting("exporter", EXPORTERS, exporters_value)
    atol: float = setting("atol", DEFAULT_ATOL, tolerance_value)
    rtol: float = setting("rtol", DEFAULT_RTOL, tolerance_value)
    batch_sizes: tuple[int, ...] = setting("batch-sizes", DEFAULT_BATCH_SIZES, batch_sizes_value)
    timeout_seconds: float = setting("timeout-seconds", DEFAULT_TIMEOUT_SECONDS, timeout_value)
    memory_limit_mb: int | None = setting("memory-limit-mb", None, memory_limit_value)
    runtime_optimization: str = setting("runtime-optimization", DEFAULT_OPTIMIZATION,
                                        optimization_value)
    # A [[model]] key (settings/model_keys.py): input -> axis -> the sizes to run that axis at.
    axis_sizes: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    # Deployment variants built from the verified fp32 model (variants/).
    variants: tuple[str, ...] = setting("variants", (), variants_value)
    calibration: str = setting("calibration", "minmax", calibration_value)
    min_sqnr_db: float | None = setting("min-sqnr-db", None, sqnr_value)
    min_top1_agreement: float | None = setting("min-top1-agreement", None, agreement_value)
    drift_warning_ratio: float = setting("drift-warning-ratio", DEFAULT_DRIFT_WARNING_RATIO,
                                         drift_ratio_value)


def overridable() -> tuple[Overridable, ...]:
    """The keys declared with `setting(...)`, in declaration order."""
    return tuple(Overridable(f.metadata["key"], f.name, f.metadata["check"])
                 for f in dataclasses.fields(ModelSpec) if "key" in f.metadata)


@dataclass(frozen=True)
class Settings:
    repo: Path
    config_path: Path
    models: tuple[ModelSpec, ...]

    def relative(self, path: Path) -> str:
        """A path as the user wrote it: relative to the repository, with forward slashes."""
        try:
            return path.resolve().relative_to(self.repo.resolve()).as_posix()
        except ValueError:
            return path.as_posix()
