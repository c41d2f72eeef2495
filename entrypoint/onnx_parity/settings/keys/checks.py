"""The checks of the keys settable at the top level and per model, and their defaults.

Each check takes the value as written and `where` (the file, the model, the key) and returns
the value ModelSpec holds, or raises ConfigError with one paragraph saying what to write
instead. The keys themselves are declared in settings/schema.py.
"""

from __future__ import annotations

from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.source_folders import SourceFolders
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    did_you_mean,
    finite_number,
    integer,
    no_duplicates,
    quoted,
    show_value,
    shown,
    wrong_type,
)

EXPORTERS = ("dynamo", "torchscript")
EXPORTER_CHOICES = ("auto", *EXPORTERS)
DEFAULT_OPSET = 18
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4
DEFAULT_BATCH_SIZES = (1, 4)
DEFAULT_TIMEOUT_SECONDS = 600.0
MIN_OPSET = 7
MAX_OPSET = 23
VARIANTS = ("int8-dynamic", "int8-static", "fp16", "int4")
CALIBRATIONS = ("minmax", "entropy", "percentile")
# onnxruntime's graph optimization levels, lowest first; "all" is onnxruntime's own default.
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
DEFAULT_OPTIMIZATION = "all"
DEFAULT_DRIFT_WARNING_RATIO = 10.0
DEFAULT_REPRO_MAX_MB = 4.0  # a repro folder stays small enough to attach to a bug
DEFAULT_LOCALISE_MAX_VALUES = 5000  # values marked as outputs at once, at most
# The dtypes a model may be checked in (`dtype`), and the tolerance defaults (atol, rtol) for a
# model that computes in each: what the dtype holds (float16 keeps 11 significant bits, about 3
# decimal digits; bfloat16 8, about 2), with room for a network's accumulated rounding. Measured
# on a tiny Llama (docs/comparison.md): float16 onnxruntime against float16 PyTorch, max abs diff
# 3.1e-4 on logits up to 0.42; bfloat16 PyTorch against float32, 2.4e-3.
DTYPES = ("float32", "float16", "bfloat16")
DTYPE_TOLERANCES = {"float32": (DEFAULT_ATOL, DEFAULT_RTOL), "float16": (1e-3, 1e-2),
                    "bfloat16": (1e-2, 5e-2)}


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


def dtype_defaults(index: int) -> str:
    """Each dtype's default atol (index 0) or rtol (1) as the docs show it: `1e-5 (float32)`."""
    shown = []
    for dtype, figures in DTYPE_TOLERANCES.items():
        mantissa, exponent = f"{figures[index]:e}".split("e")
        shown.append(f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)} ({dtype})")
    return ", ".join(shown)


def dtype_value(value: object, where: str) -> str:
    return _choice(value, where, DTYPES, "dtype",
                   " (the dtype the model and its float samples are cast to before export)")


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
    return _positive_integer(value, where, "a positive whole number of megabytes, e.g. "
                             "memory-limit-mb = 4096 (omit it for no limit)")


def _positive_integer(value: object, where: str, fix: str) -> int:
    number = integer(value, where, fix)
    if number <= 0:
        raise ConfigError(f"{where}: {number} is not positive. Use {fix}.")
    return number


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


def repro_size_value(value: object, where: str) -> float:
    number = finite_number(value, where, "a number of megabytes, e.g. repro-max-mb = 4")
    if number <= 0:
        raise ConfigError(f"{where}: {number} is not a positive number of megabytes. Use a "
                          f"value > 0, e.g. {DEFAULT_REPRO_MAX_MB:g}.")
    return float(number)


def localise_limit_value(value: object, where: str) -> int:
    return _positive_integer(value, where,
                             "a positive whole number of values, e.g. localise-max-values = 5000")


def python_path_value(value: object, context: KeyContext) -> SourceFolders:
    """Folders searched before the repository root for the factory's modules; they replace
    what the build configuration names (settings/source_folders.py)."""
    fix = 'an array of folders relative to the repository root, e.g. python-path = ["lib"]'
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise wrong_type(context.where, value, fix)
    no_duplicates(tuple(value), context.where, "list each folder once")
    folders = tuple(resolve_inside(context.root, raw, context.where) for raw in value)
    return SourceFolders(folders, context.where)
