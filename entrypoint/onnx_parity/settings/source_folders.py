"""Where the repository keeps its Python packages, read from its own build configuration.

A `src/` layout puts `acme` in `src/acme/`, so `factory = "acme.nets:build"` imports only once
`src` is on sys.path. The folder is read from the files the project already has, the way its
build backend reads them, and nothing is ever run (no setup.py): pyproject.toml's
`[tool.setuptools]` (`package-dir`, `packages.find.where`), hatch's wheel `packages` and
`sources`, pdm's `package-dir`, poetry's `packages` (`from`), setup.cfg's `[options]` (read
with configparser). With none of those, a `src/` folder holding the factory's top-level package
is taken. The `python-path` key names any other folder; it replaces what is found here.

Unreadable or odd build files name no folder: they are the project's, and not ours to judge.
A folder outside the repository, or one that does not exist, is never taken.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.values import ConfigError

PYPROJECT = "pyproject.toml"
SETUP_CFG = "setup.cfg"
SRC = "src"


@dataclass(frozen=True)
class SourceFolders:
    """The folders searched before the repository root for the factory's modules."""

    folders: tuple[Path, ...] = ()  # absolute, inside the repository, in search order
    origin: str = ""  # what named them, for messages: a build file's key, or `python-path`

    def searched(self, root: Path) -> str:
        """Where a module was looked for, in words: the root, then each folder and its origin."""
        if not self.folders:
            why = (f"{self.origin} names no other folder" if self.origin else
                   "no build file names a source folder, and python-path is not set")
            return f"the repository root only ({why})"
        names = ", ".join(f"{folder.relative_to(root).as_posix()}/" for folder in self.folders)
        return f"the repository root and {names} (named by {self.origin})"


def found_source_folders(root: Path, factory: str) -> SourceFolders:
    """The source folders the build configuration at `root` names, else `src/` when it holds
    the top-level package of `factory` ("module:callable")."""
    named = _kept(root, _named(root))
    if named:
        return SourceFolders(tuple(folder for _, folder in named),
                             ", ".join(dict.fromkeys(origin for origin, _ in named)))
    top = factory.partition(":")[0].split(".")[0]
    src = root / SRC
    if top and ((src / top).is_dir() or (src / f"{top}.py").is_file()):
        return SourceFolders((src,), f'a {SRC}/ folder holding "{top}"')
    return SourceFolders()


def _kept(root: Path, named: Iterator[tuple[str, str]]) -> list[tuple[str, Path]]:
    """Each folder once, in order, when it exists inside the repository and is not the root."""
    kept: list[tuple[str, Path]] = []
    for origin, text in named:
        folder = _inside(root, text)
        if (folder is not None and folder != root and folder.is_dir()
                and folder not in (seen for _, seen in kept)):
            kept.append((origin, folder))
    return kept


def _inside(root: Path, text: str) -> Path | None:
    try:
        return resolve_inside(root, text, "")
    except ConfigError:
        return None


def _named(root: Path) -> Iterator[tuple[str, str]]:
    """(origin, folder as written) for every source folder the build files name."""
    pyproject = _toml(root / PYPROJECT)
    tool = pyproject.get("tool")
    if isinstance(tool, dict):
        yield from _setuptools(_table(tool, "setuptools"))
        yield from _hatch(_table(tool, "hatch", "build"))
        yield from _pdm(_table(tool, "pdm", "build"))
        yield from _poetry(_table(tool, "poetry"))
    yield from _setup_cfg(root / SETUP_CFG)


def _setuptools(table: dict[str, object]) -> Iterator[tuple[str, str]]:
    where = _table(table, "packages", "find").get("where")
    for folder in _strings(where):
        yield f"{PYPROJECT} [tool.setuptools.packages.find] where", folder
    yield from ((f"{PYPROJECT} [tool.setuptools] package-dir", folder)
                for folder in _package_dirs(table.get("package-dir")))


def _hatch(build: dict[str, object]) -> Iterator[tuple[str, str]]:
    for name, table in (("tool.hatch.build.targets.wheel", _table(build, "targets", "wheel")),
                        ("tool.hatch.build", build)):
        for package in _strings(table.get("packages")):
            parent = package.rstrip("/").rpartition("/")[0]
            if parent:
                yield f"{PYPROJECT} [{name}] packages", parent
        sources = table.get("sources")
        prefixes = ([key for key, value in sources.items() if value == ""]
                    if isinstance(sources, dict) else _strings(sources))
        yield from ((f"{PYPROJECT} [{name}] sources", prefix) for prefix in prefixes)


def _pdm(build: dict[str, object]) -> Iterator[tuple[str, str]]:
    folder = build.get("package-dir")
    if isinstance(folder, str):
        yield f"{PYPROJECT} [tool.pdm.build] package-dir", folder


def _poetry(poetry: dict[str, object]) -> Iterator[tuple[str, str]]:
    packages = poetry.get("packages")
    for package in packages if isinstance(packages, list) else []:
        folder = package.get("from") if isinstance(package, dict) else None
        if isinstance(folder, str):
            yield f"{PYPROJECT} [tool.poetry] packages from", folder


def _setup_cfg(path: Path) -> Iterator[tuple[str, str]]:
    if not path.is_file():
        return
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"), str(path))
    except (configparser.Error, OSError, UnicodeDecodeError):
        return
    where = parser.get("options.packages.find", "where", fallback="")
    yield from ((f"{SETUP_CFG} [options.packages.find] where", folder)
                for folder in where.split())
    lines = parser.get("options", "package_dir", fallback="").splitlines()
    mapping = dict(line.partition("=")[::2] for line in lines if "=" in line)
    yield from ((f"{SETUP_CFG} [options] package_dir", folder)
                for folder in _package_dirs({k.strip(): v.strip() for k, v in mapping.items()}))


def _package_dirs(mapping: object) -> Iterator[str]:
    """The folders on sys.path that setuptools' `package-dir` implies: the root package's
    folder (`"" = "src"`), and the parent of a package kept under its own name (`acme =
    "lib/acme"`); a package renamed on the way (`acme = "lib/other"`) cannot be a sys.path
    folder and is left out."""
    if not isinstance(mapping, dict):
        return
    for package, folder in mapping.items():
        if not isinstance(folder, str) or not isinstance(package, str):
            continue
        if package == "":
            yield folder
        elif "." not in package and folder.rstrip("/").rpartition("/")[2] == package:
            yield folder.rstrip("/").rpartition("/")[0] or "."


def _toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as stream:
            return tomllib.load(stream)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError, RecursionError):
        return {}


def _table(table: dict[str, object], *names: str) -> dict[str, object]:
    for name in names:
        inner = table.get(name)
        if not isinstance(inner, dict):
            return {}
        table = inner
    return table


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
