"""What `onnx-parity init` writes: the sample files and the `[[model]]` entry.

The configuration keeps every byte it had: the entry is appended as text (with the file's own
line endings). Only `--force` over an existing model of the same name rewrites the file, with
tomlkit (which keeps the other entries, comments and formatting as written), to remove the old
entry before the new one is appended. Nothing is overwritten without `--force`, and when the
result would not load, every file is put back as it was.
"""

from __future__ import annotations

import io
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tomlkit

from onnx_parity.settings import (
    CONFIG_NAME,
    PYPROJECT_NAME,
    PYPROJECT_TABLE,
    ConfigError,
    InitError,
    entry_header,
    load_settings,
)

NEW_FILE_HEADER = ("# onnx-parity configuration: the models to export to ONNX and check against "
                   "PyTorch.\n# Every key is described in onnx-parity's README "
                   '("Configuration").\n')


@dataclass(frozen=True)
class ConfigTarget:
    """The file the entry goes into."""

    path: Path
    label: str  # as the user knows it, relative to the repository
    in_pyproject: bool

    @property
    def header(self) -> str:
        return entry_header(self.in_pyproject)


def config_target(repo: Path, config: Path | None) -> ConfigTarget:
    """--config if given; else onnx-parity.toml, else pyproject.toml when it has
    [tool.onnx-parity]; else a new onnx-parity.toml."""
    if config is not None:
        path = (config if config.is_absolute() else Path.cwd() / config).resolve()
        return ConfigTarget(path, _label(repo, path), path.name == PYPROJECT_NAME)
    pyproject = repo / PYPROJECT_NAME
    if not (repo / CONFIG_NAME).is_file() and pyproject.is_file() and _has_table(pyproject):
        return ConfigTarget(pyproject, PYPROJECT_NAME, True)
    return ConfigTarget(repo / CONFIG_NAME, CONFIG_NAME, False)


def existing_models(repo: Path, target: ConfigTarget) -> tuple[str, ...]:
    """The model names the file declares; it must load as it is (init adds to a valid file)."""
    if not target.path.is_file() or not _declares_models(target):
        return ()
    try:
        return tuple(spec.name for spec in load_settings(repo, target.path).models)
    except ConfigError as error:
        raise InitError(f"the existing configuration does not load, so init does not add to "
                        f"it: {error}") from None


def refuse_overwrites(target: ConfigTarget, name: str, names: tuple[str, ...],
                      samples: list[Path], force: bool) -> None:
    if force:
        return
    if name in names:
        raise InitError(f'model "{name}" is already in {target.label}. Fix: choose another '
                        "--name, or pass --force to replace its entry and samples.")
    taken = [path for path in samples if path.exists()]
    if taken:
        shown = ", ".join(path.name for path in taken)
        raise InitError(f"sample file(s) already exist in {taken[0].parent}: {shown}. Fix: "
                        "pass --force to overwrite them, or choose another --name.")


@dataclass
class Written:
    """Files changed so far with their previous bytes (None: did not exist), to undo."""

    before: dict[Path, bytes | None] = field(default_factory=dict)

    def keep(self, path: Path) -> None:
        if path not in self.before:
            self.before[path] = path.read_bytes() if path.is_file() else None

    def undo(self) -> None:
        for path, data in self.before.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)


def write_entry(repo: Path, target: ConfigTarget, name: str, entry: str,
                samples: dict[Path, np.ndarray]) -> None:
    """The samples, then the entry; all undone if the configuration would not load after."""
    written = Written()
    try:
        for path, array in samples.items():
            written.keep(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_npy(array))
        written.keep(target.path)
        text = _with_entry(target, name, entry)
        tomllib.loads(text)
        target.path.parent.mkdir(parents=True, exist_ok=True)
        target.path.write_bytes(text.encode("utf-8"))
        load_settings(repo, target.path)
    except (ConfigError, tomllib.TOMLDecodeError) as error:
        written.undo()
        raise InitError(f"adding the entry would leave {target.label} unreadable ({error}); "
                        "nothing was changed. Fix the file, or pass a new one with --config."
                        ) from None
    except OSError as error:
        written.undo()
        raise InitError(f"cannot write {error.filename}: {error.strerror}. Nothing was changed."
                        ) from None


def _with_entry(target: ConfigTarget, name: str, entry: str) -> str:
    if not target.path.is_file():
        return NEW_FILE_HEADER + "\n" + entry
    old = target.path.read_bytes().decode("utf-8")
    old = _without_model(old, target, name)
    newline = "\r\n" if "\r\n" in old else "\n"
    if old and not old.endswith("\n"):
        old += newline
    separator = newline if old.strip() else ""
    return old + separator + entry.replace("\n", newline)


def _without_model(text: str, target: ConfigTarget, name: str) -> str:
    """The file without model `name`'s entry (for --force), everything else as written."""
    document = tomlkit.parse(text)
    table: Any = document
    if target.in_pyproject:
        table = document.get("tool", {}).get(PYPROJECT_TABLE, {})
    entries = table.get("model") if hasattr(table, "get") else None
    if entries is None:
        return text
    index = next((i for i, entry in enumerate(entries) if entry.get("name") == name), None)
    if index is None:
        return text
    if len(entries) == 1:
        del table["model"]
    else:
        del entries[index]
    return tomlkit.dumps(document)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _has_table(pyproject: Path) -> bool:
    try:
        tool = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return False
    return isinstance(tool, dict) and PYPROJECT_TABLE in tool


def _declares_models(target: ConfigTarget) -> bool:
    try:
        document = tomllib.loads(target.path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return True  # let load_settings say what is wrong
    if target.in_pyproject:
        document = document.get("tool", {}).get(PYPROJECT_TABLE, {})
    return isinstance(document, dict) and "model" in document


def _label(repo: Path, path: Path) -> str:
    try:
        return path.relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)
