"""A model's fingerprint: everything its result depends on that is known before it runs.

The static part, hashed into the entry's key: the model's resolved configuration entry
(paths relative to the repository), the tool's version, the Python version, every installed
distribution's name and version, the sha256 of its weights and sample files, and the factory
module's own file (or its absence). The dynamic part is the list of repository files the
worker opened or imported (pipeline/cache/reads.py), stored in the entry and re-hashed on
every lookup: an entry matches only while each of those files still has its recorded hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from onnx_parity import __version__
from onnx_parity.pipeline.cache.reads import file_sha256
from onnx_parity.pipeline.preimports import module_file
from onnx_parity.settings import ModelSpec, declared_keys

# Keys that change how a finished result is judged afterwards, not what the worker measures.
NOT_MEASURED = frozenset(key.field for key in declared_keys() if not key.measured)


def environment(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """What every model's result depends on: the tool, Python, the installed packages, and the
    variables the configuration's `env` sets (as written: a relative path stays relative)."""
    packages: dict[str, str] = {}
    for dist in metadata.distributions():
        name = str(dist.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            packages.setdefault(name, dist.version)
    found: dict[str, object] = {
        "tool": __version__, "python": sys.version,
        "distributions": sorted(f"{name}=={version}" for name, version in packages.items())}
    if env:  # left out when unset: keys of runs without `env` stay as they were
        found["env"] = dict(sorted(env.items()))
    return found


def spec_document(spec: ModelSpec, repo: Path, *, measured_only: bool) -> dict[str, object]:
    """The resolved configuration entry as plain JSON values, paths relative to `repo`."""
    root = repo.resolve()
    document = {f.name: _plain(getattr(spec, f.name), root) for f in dataclasses.fields(spec)
                if not (measured_only and f.name in NOT_MEASURED)}
    if measured_only:  # which keys were set matters (a dtype's tolerances) only if measured
        document["explicit"] = [name for name in spec.explicit if name not in NOT_MEASURED]
    return document


def fingerprint_key(spec: ModelSpec, repo: Path, env: dict[str, object]) -> str:
    root = repo.resolve()
    document = {
        "model": spec_document(spec, root, measured_only=True),
        "environment": env,
        "files": {_relative(path, root): file_sha256(path) for path in input_files(spec)},
        "factory_module": _factory_file(spec, root),
    }
    if spec.export_command is not None:
        document["command_files"] = {_relative(path, root): file_sha256(path)
                                     for path in command_files(spec.export_command, root)}
    return _digest(document)


def configuration_sha256(specs: Sequence[ModelSpec], repo: Path) -> str:
    """The whole resolved configuration, every key included (shards must agree on it)."""
    return _digest([spec_document(spec, repo, measured_only=False) for spec in specs])


def input_files(spec: ModelSpec) -> list[Path]:
    """Weights, sample files and `eval-tokens`; every file inside a bundle or a `transformers`
    folder."""
    named = list(spec.inputs.values()) if isinstance(spec.inputs, dict) else [spec.inputs]
    paths = [path for path in (spec.weights, spec.transformers, spec.eval_tokens)
             if path is not None] + named
    found: list[Path] = []
    for path in paths:
        found += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return found


def command_files(command: str, root: Path) -> list[Path]:
    """The repository's files an `export-command` names: a script (`python scripts/x.py`) or
    a module (`python -m scripts.x`). The worker's read record keeps the Python sources only
    of its own imports, not of the command's process, so the command's own are named here."""
    arguments = shlex.split(command)
    found: list[Path] = []
    for previous, argument in zip(["", *arguments], arguments, strict=False):
        path = module_file(root, argument) if previous == "-m" else root / argument
        if path is not None and path.is_file() and path.resolve().is_relative_to(root):
            found.append(path)
    return found


def _factory_file(spec: ModelSpec, root: Path) -> list[str | None]:
    """A factory module that did not exist yet must not match an entry once it does."""
    if spec.factory is None:  # a transformers folder: its files are among input_files
        return [None, None]
    path = module_file(root, spec.factory.partition(":")[0], spec.python_path.folders)
    return [None, None] if path is None else [_relative(path, root), file_sha256(path)]


def _plain(value: object, root: Path) -> object:
    if isinstance(value, Path):
        return _relative(value, root)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), root) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): _plain(item, root) for key, item in sorted(value.items(), key=str)}
    if isinstance(value, (list, tuple)):
        return [_plain(item, root) for item in value]
    return value


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _digest(document: object) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
