"""An exported model on disk: `<name>.onnx`, and its external data beside it when it has any.

One protobuf holds at most 2 GiB, so a larger model keeps its weights in `<name>.onnx.data`,
which the .onnx names by file name (a relative location): the two files move together and
keep their names. Every stage opens a model by its path (onnx.checker, `onnx.load` without
the data, onnxruntime, which finds the data file beside it), never as bytes in memory, and
each file is hashed as it streams from disk. The cache and the output folder keep the files
as hard links where the filesystem allows, so a model is never copied through memory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.results import StoredFile

DATA_SUFFIX = ".data"  # what torch, onnx and onnxruntime's quantizer name a model's data file
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelFile:
    """An ONNX model's file and, for a model with external data, the data file beside it."""

    path: Path
    data_path: Path | None = None

    @classmethod
    def at(cls, path: Path) -> ModelFile:
        """The model at `path`, with `<path>.data` when that file exists."""
        data = data_file(path)
        return cls(path, data if data.is_file() else None)

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.path,) if self.data_path is None else (self.path, self.data_path)

    @property
    def size_bytes(self) -> int:
        """Both files together: what the model weighs on disk."""
        return sum(path.stat().st_size for path in self.files)

    def stored(self) -> tuple[StoredFile, ...]:
        """Each file's name, size and sha256 (the .onnx first), read in chunks."""
        return tuple(StoredFile(path.name, path.stat().st_size, file_sha256(path))
                     for path in self.files)


def data_file(path: Path) -> Path:
    return path.with_name(path.name + DATA_SUFFIX)


def remove_model(path: Path) -> None:
    """The model at `path` and its data file gone, where they exist (before writing it anew)."""
    for file in (path, data_file(path)):
        file.unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def link_or_copy(source: Path, destination: Path) -> None:
    """`destination` with `source`'s content: a hard link where the filesystem allows (no
    byte is copied), else a copy streamed on disk. An existing destination is replaced."""
    destination.unlink(missing_ok=True)
    try:
        os.link(source, destination)
    except OSError:  # another filesystem, or one without hard links
        shutil.copyfile(source, destination)
