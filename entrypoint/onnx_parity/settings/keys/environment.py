"""The `env` key: environment variables for the model's code, and the names it may not set.

The variables are set in the environment the worker pool starts from, so the zygote has them
before it imports the installed packages the factories use, and every forked worker inherits
them (pipeline/all_models.py). A library that reads a variable when it is imported
(ultralytics' `YOLO_OFFLINE`, matplotlib's `MPLCONFIGDIR`) sees it; a factory setting it would
be too late. Refused: the credentials the tool keeps from model code (credentials.py), and the
variables the tool sets or decides itself in every worker, which a value here would fight.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from onnx_parity.credentials import SECRET_VARIABLES
from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.values import ConfigError, KeyContext, dotted, shown, wrong_type

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a shell accepts as a variable name
_THREADS = ("the tool sets each worker's thread count itself (the cores shared among the "
            "`--jobs` workers); run with `--jobs 1` to give one model every core")
# Variables the tool sets or decides in every worker, and why a value here cannot stand.
TOOL_VARIABLES = {
    "PYTHONIOENCODING": "the tool sets it to utf-8 in every worker, so that an ascii console "
                        "cannot turn an exporter's output into an error",
    "OMP_NUM_THREADS": _THREADS,
    "MKL_NUM_THREADS": _THREADS,
    "PYTHONPATH": "the tool puts the source folders on the import path itself and imports its "
                  "own code through it; name the folders in `python-path`",
}
_FIX = 'e.g. env = { YOLO_OFFLINE = "1", MPLCONFIGDIR = ".cache/matplotlib" }'


def env_value(value: object, context: KeyContext) -> dict[str, str]:
    """Variable name -> value as written (a value starting with `.` checked to be a path
    inside the repository; `resolved_env` makes it absolute)."""
    if not isinstance(value, dict):
        raise wrong_type(context.where, value, f"a table of variable name -> string, {_FIX}")
    return {_name(name, context.where): _value(name, item, context)
            for name, item in value.items()}


def _name(name: str, where: str) -> str:
    if not NAME.fullmatch(name) and name not in SECRET_VARIABLES:  # INPUT_GITHUB-TOKEN
        raise ConfigError(f'{where}: "{shown(name)}" is not an environment variable name. Use '
                          f"letters, digits and _, not starting with a digit, {_FIX}.")
    if name in SECRET_VARIABLES:
        raise ConfigError(
            f"{where}: {name} cannot be set here: it is a credential, which the tool removes "
            "from the environment of the model's code: model code never gets a token. Remove "
            f"{name} from `env`.")
    if name in TOOL_VARIABLES:
        raise ConfigError(f"{where}: {name} cannot be set here: {TOOL_VARIABLES[name]}. "
                          f"Remove {name} from `env`.")
    return name


def _value(name: str, value: object, context: KeyContext) -> str:
    where = context.place.at(dotted(context.key, name))
    if not isinstance(value, str):
        raise wrong_type(where, value, f'a string (environment values are text), e.g. {name} = "1"')
    if "\0" in value:
        raise ConfigError(f"{where}: the value contains a NUL character, which no environment "
                          "variable can hold. Remove it.")
    if value.startswith("."):
        resolve_inside(context.root, value, where)  # refused when it leads outside
    return value


def resolved_env(env: Mapping[str, str], repo: Path) -> dict[str, str]:
    """The variables as the model's code gets them: a value starting with `.` is a path from
    the repository root, made absolute (the zygote and the workers run in other folders)."""
    root = repo.resolve()
    return {name: str(root / value) if value.startswith(".") else value
            for name, value in env.items()}
