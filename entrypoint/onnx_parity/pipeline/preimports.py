"""Which installed packages the configured factories import, read from their source with `ast`.

The zygote imports them once before it forks (pipeline/warm_up.py), so a worker building a
transformers model does not import transformers again (measured: 2.4 s per model in a forked
worker against 0.1-0.4 s in one process). Nothing of the repository is imported here or in
the zygote: its files are only parsed, and only names that resolve to installed distributions
outside the repository are kept, so a model's own modules still load fresh in each worker.

An entry is `module` or `module:name,name` (`from module import name, name`): packages such as
transformers load their classes lazily on attribute access, and that access is the slow part.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

from onnx_parity.models import checkpoint_classes
from onnx_parity.settings import ModelSpec

# A repository whose factories reach more modules than this is read no further.
MAX_FILES = 200
_OURS = {"onnx_parity", "__future__"}


def installed_imports(specs: Sequence[ModelSpec], repo: Path) -> tuple[str, ...]:
    """Preload entries for the installed packages the factories' modules import, sorted.

    The repository's own packages are never among them, installed or not (`pip install -e .`):
    every top-level name found under the root or a source folder (`python-path`, or what the
    build configuration names), and every installed package whose files lie in the repository.
    """
    root = repo.resolve()
    folders = tuple(dict.fromkeys(folder for spec in specs for folder in spec.python_path.folders))
    own = (root, folders)
    installed = set(metadata.packages_distributions())
    wanted: dict[str, set[str]] = {}
    queue = [spec.factory.partition(":")[0] for spec in specs if spec.factory]
    for spec in specs:  # a transformers folder: the package and the class its config names
        if spec.transformers is not None:
            _keep(wanted, "transformers", checkpoint_classes(spec.transformers), installed, own)
    read: set[Path] = set()
    while queue and len(read) < MAX_FILES:
        module = queue.pop()
        path = module_file(root, module, folders)
        if path is None:
            _keep(wanted, module, (), installed, own)
            continue
        if path in read:
            continue
        read.add(path)
        for target, names in _imports(path, module):
            if module_file(root, target, folders) is not None:
                queue += [target, *(f"{target}.{name}" for name in names)]
            else:
                _keep(wanted, target, names, installed, own)
    return tuple(f"{name}:{','.join(sorted(names))}" if names else name
                 for name, names in sorted(wanted.items()))


def module_file(root: Path, module: str, folders: Sequence[Path] = ()) -> Path | None:
    """The repository's file for dotted `module`, looked for in the source folders, then the
    root (the order of sys.path in the worker), without importing anything."""
    for base in (*folders, root):
        path = base.joinpath(*module.split("."))
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@functools.cache
def _owned(top: str, root: Path, folders: tuple[Path, ...]) -> bool:
    """`top` is the repository's own package: it shadows any installed one in the worker, or
    the installed one is the repository's code (an editable install points into it)."""
    if any(module_file(base, top) is not None or (base / top).is_dir()
           for base in (*folders, root)):
        return True
    try:
        found = importlib.util.find_spec(top)  # finds the package, imports nothing of it
    except (ImportError, ValueError):
        return False
    if found is None:
        return False
    places = [found.origin] if found.has_location and found.origin else []
    places += list(found.submodule_search_locations or [])
    return any(Path(place).resolve().is_relative_to(root) for place in places)


def _keep(wanted: dict[str, set[str]], module: str, names: Iterable[str],
          installed: set[str], own: tuple[Path, tuple[Path, ...]]) -> None:
    top = module.split(".")[0]
    if top in _OURS or top in sys.stdlib_module_names or top not in installed:
        return
    if _owned(top, *own):
        return
    wanted.setdefault(module, set()).update(name for name in names if name != "*")


def _imports(path: Path, module: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every import in the file, relative ones resolved against `module`."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []  # the worker will report it as the model's load error
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, package)
            if target:
                found.append((target, tuple(alias.name for alias in node.names)))
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if node.level == 0:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])]) or None
