"""The cache folder: one entry per model and fingerprint, written then renamed into place.

    DIR/v1/<model>/<key>/<reads>/entry.json   the result, its log, the files it read, its time
    DIR/v1/<model>/<key>/<reads>/model.onnx   the exported model, when there is one
    DIR/v1/<model>/<key>/<reads>/model.onnx.data   its external data, when it has any
    DIR/v1/<model>/<key>/<reads>/variant.<variant>.onnx(.data)   each deployment variant built
    DIR/v1/<model>/<key>/<reads>/repro/<file>   a failing model's repro folder (subgraph.onnx,
                                                inputs.npz, expected.npz)
    DIR/CACHEDIR.TAG   marks the folder as a cache (backup tools and the workers' watch skip it)

`<key>` is the static fingerprint; `<reads>` the digest of the files the worker read, so a
helper file that changes back and forth (the base branch's and a pull request's version) keeps
one entry per version side by side instead of each run overwriting the other's.

An entry is assembled in a private folder beside its final place and renamed there in one
step, so two runs writing the same folder at once (matrix shards) never leave half an entry:
the first rename wins, the second finds the place taken and drops its copy (same key, same
result). An entry that cannot be read, is truncated, belongs to another tool or model, or
whose model file does not match its hash is ignored with one line saying why, and the model
runs. Entries are JSON and ONNX only: nothing in the folder is ever unpickled or executed.

A model's files (and a model past 2 GiB has two: the .onnx and its external data) go into an
entry and back into the work folder as hard links where the filesystem allows, copies where it
does not; each is checked against its sha256 before it is handed back. So are the files of a
failing model's repro folder (entry.json's `repro_files`: name -> sha256), handed back as
`<name>.repro/` beside the model, so a cached failure's comment and folder say what a fresh
run's would. An entry written before the cache kept them has no `repro_files`: its result says
its folder was not kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.findings import CATALOGUE
from onnx_parity.model_files import link_or_copy
from onnx_parity.pipeline.cache.reads import file_sha256
from onnx_parity.results import ModelResult, Provenance, Repro, StoredFile, VariantResult

FORMAT = "v1"
TOOL = "onnx-parity"
MODEL_FILE = "model.onnx"
REPRO_FOLDER = "repro"
NOT_KEPT = ("the result came from a cache entry written before the cache kept repro folders "
            "(run with --no-cache to make it again)")
# The Cache Directory Tagging spec's file: backup tools skip the folder, and so does a worker's
# watch for the files a model opens (watch.py), when the cache lies inside the repository.
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This folder is onnx-parity's result cache (--cache): it can be deleted.\n")

Json = Any
Notify = Callable[[str], None]


class CorruptEntry(Exception):
    """An entry that cannot be used; its text says why."""


@dataclass(frozen=True)
class ResultCodec:
    """How a ModelResult becomes JSON and back (report/serialization.py, handed in by the CLI)."""

    # report/json_shapes.py's ModelJson, which this layer cannot import: any JSON object.
    to_json: Callable[[ModelResult], Mapping[str, object]]
    from_json: Callable[[Json], ModelResult]


class ModelCache:
    def __init__(self, folder: Path, codec: ResultCodec, provenance: Provenance,
                 notify: Notify, read: bool = True) -> None:
        self.root = folder / FORMAT
        self.codec = codec
        self.provenance = provenance
        self.notify = notify
        self.read = read  # False (--no-cache): look nothing up, still write fresh entries
        _tag(folder)  # before any worker watches the repository the folder may lie in

    # ------------------------------------------------------------------------- lookup

    def lookup(self, name: str, key: str, repo: Path, workdir: Path) -> ModelResult | None:
        """The cached result of `name` at fingerprint `key`, or None (the model must run)."""
        if not self.read:
            return None
        for folder in sorted((self.root / name / key).glob("[!.]*")):
            try:
                entry = self._entry(folder, name, key)
                if _unchanged(entry["files_read"], repo):
                    return self._result(entry, folder, workdir)
            except (CorruptEntry, OSError, KeyError, TypeError, ValueError) as error:
                self.notify(f"cache: ignoring the entry for {name} ({_reason(error)}); "
                            "checking it again")
                _discard(folder)  # so this run's fresh result can take its place
        return None

    def _entry(self, folder: Path, name: str, key: str) -> dict[str, Json]:
        try:
            entry = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
        except ValueError as error:
            raise CorruptEntry(f"entry.json is not JSON: {error}") from None
        if not isinstance(entry, dict) or entry.get("tool") != TOOL:
            raise CorruptEntry("not an onnx-parity cache entry")
        if entry.get("format") != FORMAT or entry.get("model") != name or entry.get("key") != key:
            raise CorruptEntry("written for another format, model or fingerprint")
        if not isinstance(entry.get("files_read"), dict):
            raise CorruptEntry("no list of the files the model read")
        return entry

    def _result(self, entry: dict[str, Json], folder: Path, workdir: Path) -> ModelResult:
        result = self.codec.from_json(entry["result"])
        onnx_path = None
        if result.onnx_sha256 is not None:
            onnx_path = _linked_back(folder, _model_files(result), MODEL_FILE,
                                     workdir / f"{result.name}.onnx")
        variants = tuple(_variant_back(variant, folder, workdir / result.name)
                         for variant in result.variants)
        return dataclasses.replace(
            result, log=str(entry["log"]), files_read=dict(entry["files_read"]),
            onnx_path=str(onnx_path) if onnx_path else None, variants=variants,
            repro=_repro_back(result.repro, entry.get("repro_files"), folder,
                              workdir / f"{result.name}.repro"),
            cached_from=Provenance(**entry["provenance"]))

    # ------------------------------------------------------------------------- store

    def store(self, key: str, result: ModelResult, seconds: float) -> None:
        """Keep a worker's result; a failure to write only costs the next run its speed-up."""
        # A crash, a timeout, the memory or a load error always runs again (CodeInfo.cached).
        if not all(CATALOGUE[f.code].cached for f in result.findings):
            return
        final = self.root / result.name / key / _digest(result.files_read)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=final.parent))
            self._write(staging, key, result, seconds)
            if not self.read and final.exists():
                _discard(final)  # --no-cache: this run's result replaces the old one
            try:
                os.rename(staging, final)
            except OSError:  # another run put the same entry there first
                shutil.rmtree(staging, ignore_errors=True)
        except OSError as error:
            self.notify(f"cache: could not keep {result.name} ({_reason(error)})")

    def _write(self, staging: Path, key: str, result: ModelResult, seconds: float) -> None:
        if result.onnx_path and Path(result.onnx_path).is_file():
            _keep(Path(result.onnx_path), _model_files(result), staging / MODEL_FILE)
        for variant in result.variants:
            if variant.onnx_path and Path(variant.onnx_path).is_file():
                _keep(Path(variant.onnx_path), _variant_files(variant),
                      staging / _variant_file(variant))
        entry = {"tool": TOOL, "format": FORMAT, "model": result.name, "key": key,
                 "seconds": seconds, "provenance": dataclasses.asdict(self.provenance),
                 "files_read": result.files_read, "log": result.log,
                 "repro_files": _keep_repro(result.repro, staging / REPRO_FOLDER),
                 "result": self.codec.to_json(result)}
        (staging / "entry.json").write_text(json.dumps(entry, indent=1, allow_nan=False),
                                            encoding="utf-8")

    # ------------------------------------------------------------------------- durations

    def durations(self) -> dict[str, float]:
        """Each model's duration in its newest readable entry (what --shard balances by)."""
        found: dict[str, tuple[str, float]] = {}
        for path in sorted(self.root.glob("*/*/*/entry.json")):
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
                when, seconds = str(entry["provenance"]["created"]), float(entry["seconds"])
                name = str(entry["model"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if name not in found or when > found[name][0]:
                found[name] = (when, seconds)
        return {name: seconds for name, (_, seconds) in found.items()}


def _variant_file(variant: VariantResult) -> str:
    return f"variant.{variant.name}.onnx"


def _variant_back(variant: VariantResult, folder: Path, stem: Path) -> VariantResult:
    """A built variant's files back in the work folder, each checked against its sha256."""
    if variant.sha256 is None:
        return variant
    path = _linked_back(folder, _variant_files(variant), _variant_file(variant),
                        stem.with_name(f"{stem.name}.{variant.name}.onnx"))
    return dataclasses.replace(variant, onnx_path=str(path))


def _keep_repro(repro: Repro | None, stored: Path) -> dict[str, str]:
    """The repro folder's files linked into the entry, name -> sha256 (none: no folder, or one
    that holds no files because they did not fit)."""
    made = Path(repro.folder) if repro is not None and repro.folder else None
    if made is None or not made.is_dir():
        return {}
    kept = {}
    for path in sorted(made.iterdir()):
        if path.is_file():
            stored.mkdir(exist_ok=True)
            link_or_copy(path, stored / path.name)
            digest = file_sha256(stored / path.name)
            if digest is None:
                raise OSError(f"cannot read {stored / path.name}")
            kept[path.name] = digest
    return kept


def _repro_back(repro: Repro | None, files: Json, folder: Path, destination: Path) -> Repro | None:
    """The repro folder's files linked back into the work folder once each matches its sha256;
    an entry from before the cache kept them says so in the folder's REPORT.md."""
    if repro is None:
        return None
    if not isinstance(files, dict):
        return repro if repro.omitted else dataclasses.replace(repro, omitted=NOT_KEPT)
    checked = []
    for name, digest in sorted(files.items()):
        kept = folder / REPRO_FOLDER / Path(str(name)).name
        if file_sha256(kept) != digest:
            raise CorruptEntry(f"{REPRO_FOLDER}/{kept.name} is missing or does not match "
                               "its sha256")
        checked.append(kept)
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    for kept in checked:
        link_or_copy(kept, destination / kept.name)
    return dataclasses.replace(repro, folder=str(destination))


def _model_files(result: ModelResult) -> tuple[StoredFile, ...]:
    """The exported model's files; a result of an older version names only its .onnx."""
    return result.onnx_files or (StoredFile(f"{result.name}.onnx", 0, result.onnx_sha256 or ""),)


def _variant_files(variant: VariantResult) -> tuple[StoredFile, ...]:
    return variant.files or (StoredFile(f"{variant.name}.onnx", 0, variant.sha256 or ""),)


def _suffixes(files: tuple[StoredFile, ...]) -> list[tuple[StoredFile, str]]:
    """Each file with what its name adds to the .onnx's ("" for the .onnx, ".data" for its
    external data): the suffix it keeps in the entry (`model.onnx.data`) and back; a file of
    a name of its own beside it (an encoder-decoder's `<name>.encoder.onnx`) is `+` and that
    name."""
    first = files[0].file
    return [(file, file.file.removeprefix(first) if file.file.startswith(first)
             else f"+{file.file}") for file in files]


def _beside(path: Path, suffix: str) -> Path:
    """The file a suffix stands for beside the model at `path`."""
    return path.with_name(suffix[1:] if suffix.startswith("+") else path.name + suffix)


def _keep(onnx_path: Path, files: tuple[StoredFile, ...], stored: Path) -> None:
    """A model's files linked into the entry being written (copied where links fail)."""
    for _, suffix in _suffixes(files):
        link_or_copy(_beside(onnx_path, suffix), stored.with_name(stored.name + suffix))


def _linked_back(folder: Path, files: tuple[StoredFile, ...], stored: str,
                 destination: Path) -> Path:
    """A model's files of the entry linked into the work folder under the names the .onnx
    expects, once each one's content matches the result's sha256."""
    checked = []
    for file, suffix in _suffixes(files):
        kept = folder / (stored + suffix)
        if file_sha256(kept) != file.sha256:
            raise CorruptEntry(f"{kept.name} is missing or does not match its sha256")
        checked.append((kept, _beside(destination, suffix)))
    for source, target in checked:
        link_or_copy(source, target)
    return destination


def _unchanged(files_read: dict[str, Json], repo: Path) -> bool:
    root = repo.resolve()
    for path, digest in files_read.items():
        relative = Path(str(path))
        if relative.is_absolute() or ".." in relative.parts:
            raise CorruptEntry(f"it names a file outside the repository ({path})")
        if file_sha256(root / relative) != digest:
            return False
    return True


def _digest(files_read: dict[str, str]) -> str:
    text = json.dumps(files_read, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _tag(folder: Path) -> None:
    """CACHEDIR.TAG at the cache's root; a cache that cannot be written stays readable."""
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        tag = folder / "CACHEDIR.TAG"
        if not tag.is_file():
            tag.write_text(CACHEDIR_TAG, encoding="utf-8")


def _discard(folder: Path) -> None:
    """Move a bad entry aside in one rename (a reader sees it whole or not at all), then delete."""
    aside = folder.with_name(f".discarded-{os.getpid()}-{folder.name[:12]}")
    try:
        os.rename(folder, aside)
    except OSError:
        return  # another run moved or replaced it first
    shutil.rmtree(aside, ignore_errors=True)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error) or type(error).__name__
