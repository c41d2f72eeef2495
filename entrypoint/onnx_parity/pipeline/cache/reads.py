"""Inside a model's worker: every repository file it opened or imported, content-hashed.

An audit hook on `open` (Python's `open`, `io.open_code` for imports, `os.open`) sees a
tokenizer JSON or a config file the factory reads; `sys.modules` at the end adds every module
of the repository that was imported. Files outside the repository (installed packages, the
work folder) and compiled bytecode are left out: the installed distributions are in the
fingerprint by name and version, and bytecode follows from its source. Files read by native
code (a Rust tokenizer opening its own file) raise no audit event and are not seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from pathlib import Path

_ACTIVE: list[FilesRead] = []  # the recorder the one process-wide hook reports to
_HOOKED: list[bool] = []
_CHUNK = 1 << 20


class FilesRead:
    """Collects the paths under `repo` that this process opens from now on."""

    def __init__(self, repo: Path) -> None:
        self.root = repo.resolve()
        self._prefix = str(self.root) + os.sep
        self.paths: set[str] = set()

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
        found: dict[str, str] = {}
        for text in sorted(self.paths):
            path = Path(text)
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            digest = file_sha256(path)
            if digest is not None:
                found[path.relative_to(self.root).as_posix()] = digest
        return found


def record_reads(repo: Path) -> FilesRead:
    """Start recording for this process (a worker); later calls replace the recorder."""
    recorder = FilesRead(repo)
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


def file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
