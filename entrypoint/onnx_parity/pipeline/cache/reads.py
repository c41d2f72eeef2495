"""Inside a model's worker: every repository file it opened or imported, content-hashed.

An audit hook on `open` (Python's `open`, `io.open_code` for imports, `os.open`) sees a
tokenizer JSON or a config file the factory reads; `sys.modules` at the end adds every module
of the repository that was imported. Files opened by native code (safetensors and tokenizers in
Rust, sentencepiece in C++) raise no audit event: inotify watches on the repository's folders
(watch.py) see those. The hook knows this process's Python imports precisely, so a Python
source the watch alone saw (another worker's import) is left out. Files outside the repository
(installed packages, the work folder) and compiled bytecode are left out: the installed
distributions are in the fingerprint by name and version, and bytecode follows from its source.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from onnx_parity.pipeline.cache.watch import FolderWatch, Opened

_ACTIVE: list[FilesRead] = []  # the recorder the one process-wide hook reports to
_HOOKED: list[bool] = []
_CHUNK = 1 << 20


class FilesRead:
    """Collects the paths under `repo` that this process opens from now on."""

    def __init__(self, repo: Path, watch: FolderWatch | None = None) -> None:
        self.root = repo.resolve()
        self._prefix = str(self.root) + os.sep
        self.paths: set[str] = set()
        self.watch = watch  # native opens too, until the snapshot

    def note(self, path: object) -> None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # an int: os.fdopen of a file opened (and seen) before
        text = os.path.abspath(os.fsdecode(path))
        if text.startswith(self._prefix):
            self.paths.add(text)

    def snapshot(self) -> dict[str, str]:
        """Relative path -> sha256 of every regular file seen, imported modules included."""
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str):
                self.note(file)
        seen = set(self.paths)
        if self.watch is not None:
            seen |= _natively_opened(self.watch.stop())
            self.watch = None
        found: dict[str, str] = {}
        for text in sorted(seen):
            path = Path(text)
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            digest = file_sha256(path)
            if digest is not None:
                found[path.relative_to(self.root).as_posix()] = digest
        return found


def record_reads(repo: Path, unwatched: Iterable[Path] = ()) -> FilesRead:
    """Start recording for this process (a worker); later calls replace the recorder.
    `unwatched`: folders inside the repository that the worker itself writes (its output)."""
    for previous in _ACTIVE:
        if previous.watch is not None:
            previous.watch.stop()
    watch = FolderWatch(repo, unwatched)
    watch.start()
    recorder = FilesRead(repo, watch)
    _ACTIVE[:] = [recorder]
    if not _HOOKED:
        sys.addaudithook(_hook)  # hooks cannot be removed: one per process, reporting onward
        _HOOKED.append(True)
    return recorder


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event != "open" or not args or not _ACTIVE:
        return
    # A hook that raises would fail the user's open(); never do that.
    with contextlib.suppress(Exception):
        _ACTIVE[0].note(args[0])


def _natively_opened(opened: Opened) -> set[str]:
    """What the watch saw, but Python sources: imports are this process's own (the hook and
    `sys.modules` know them), another worker's import is not."""
    found = {text for text in opened.files if not text.endswith((".py", ".pyc"))}
    for folder in opened.unwatched:
        with contextlib.suppress(OSError):
            found.update(entry.path for entry in os.scandir(folder) if entry.is_file())
    return found


def file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
