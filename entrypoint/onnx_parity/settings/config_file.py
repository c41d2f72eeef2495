"""Find the configuration file by the documented lookup order and parse it as TOML.

Only finding and parsing: what the table says is checked by settings/loading.py.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.settings.inline_tables import spread_table_message
from onnx_parity.settings.values import ConfigError, kind

CONFIG_NAME = "onnx-parity.toml"
PYPROJECT_NAME = "pyproject.toml"
PYPROJECT_TABLE = "onnx-parity"

EXAMPLE = """\
[[model]]
name = "my-model"
factory = "models.net:build_model"   # module:callable, importable from the repository root
inputs = { input = "samples/input.npy" }"""

Table = dict[str, Any]


@dataclass(frozen=True)
class ConfigFile:
    """The file found, its label in messages, and its onnx-parity table."""

    path: Path
    label: str
    table: Table


def find_config(root: Path, config: Path | None) -> ConfigFile:
    """The configuration of the repository at `root`: `config` if given, else looked up."""
    if config is not None:
        return _given_config(root, config)
    own = root / CONFIG_NAME
    if own.is_file():
        return ConfigFile(own, CONFIG_NAME, _parse(own, CONFIG_NAME))
    pyproject = root / PYPROJECT_NAME
    if pyproject.is_file():
        table = _pyproject_table(_parse(pyproject, PYPROJECT_NAME), PYPROJECT_NAME)
        if table is not None:
            return ConfigFile(pyproject, _pyproject_label(PYPROJECT_NAME), table)
    raise ConfigError(
        f"No onnx-parity configuration in {root}: looked for {CONFIG_NAME} and for a "
        f"[tool.{PYPROJECT_TABLE}] table in {PYPROJECT_NAME}. Create {CONFIG_NAME} at the "
        f"repository root (or pass --config PATH), for example:\n\n{EXAMPLE}\n"
    )


def _given_config(root: Path, config: Path) -> ConfigFile:
    config = Path(config)
    path = config if config.is_absolute() else Path.cwd() / config
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"--config {config}: {path} {problem}. Pass the path of an existing "
            f"{CONFIG_NAME} (or {PYPROJECT_NAME}), relative to the current directory or absolute."
        )
    label = _label(root, path)
    document = _parse(path, label)
    if path.name != PYPROJECT_NAME:
        return ConfigFile(path, label, document)
    table = _pyproject_table(document, label)
    if table is None:
        raise ConfigError(
            f"{label}: there is no [tool.{PYPROJECT_TABLE}] table. Add one with at least one "
            f"[[tool.{PYPROJECT_TABLE}.model]] entry, or pass a {CONFIG_NAME} instead."
        )
    return ConfigFile(path, _pyproject_label(label), table)


def _label(root: Path, path: Path) -> str:
    """The config file as the user knows it: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _pyproject_label(label: str) -> str:
    return f"{label} [tool.{PYPROJECT_TABLE}]"


def _parse(path: Path, label: str) -> Table:
    try:
        text = path.read_bytes().decode()  # as tomllib.load reads it
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = spread_table_message(label, text, str(error))
        raise ConfigError(message or _toml_error_text(label, str(error))) from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{label}: not UTF-8 text (byte {error.start}). Save the file as UTF-8."
        ) from None
    except ValueError as error:  # e.g. an integer literal too long for int()
        raise ConfigError(f"{label}: not valid TOML: {error}. Fix the value.") from None
    except RecursionError:
        raise ConfigError(f"{label}: values are nested too deeply to read.") from None
    except OSError as error:
        raise ConfigError(f"{label}: cannot be read ({error.strerror}).") from None


def _toml_error_text(label: str, message: str) -> str:
    """tomllib's message, with its "(at line L, column C)" moved to the front."""
    spot = re.search(r"\s*\(at (line \d+, column \d+|end of document)\)$", message)
    if spot is None:
        return f"{label}: not valid TOML: {message}. Fix the syntax (see https://toml.io)."
    reason = message[: spot.start()]
    return f"{label}: {spot.group(1)}: not valid TOML: {reason}. Fix the syntax at that spot."


def _pyproject_table(document: Table, label: str) -> Table | None:
    tool = document.get("tool")
    if not isinstance(tool, dict) or PYPROJECT_TABLE not in tool:
        return None
    table = tool[PYPROJECT_TABLE]
    if not isinstance(table, dict):
        raise ConfigError(
            f"{label}: tool.{PYPROJECT_TABLE} is {kind(table)}, not a table. Write it as a "
            f"[tool.{PYPROJECT_TABLE}] section with [[tool.{PYPROJECT_TABLE}.model]] entries."
        )
    return table
