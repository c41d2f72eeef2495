"""Inside a model's worker: every repository file opened while it runs, native opens included.

Python's audit hook (reads.py) sees only what Python opens; safetensors and tokenizers (Rust)
and sentencepiece (C++) open their files natively. The kernel sees every open: an inotify
`IN_OPEN` watch on each folder of the repository reports the name of each file opened in it,
by any code, through ctypes on libc (`inotify_init1`, `inotify_add_watch`, the events read from
its descriptor by a thread, so the kernel's queue never overflows while forward runs).

inotify does not say which process opened a file: while two workers run at once (`--jobs`),
each also records what the other opened, so a change to such a file runs both models again
(too much, never too little). Folders that cannot hold what a model reads are not watched:
`.git`, bytecode and tool caches, virtual environments (`pyvenv.cfg`: installed packages are in
the fingerprint by version), tagged cache folders (`CACHEDIR.TAG`, which the result cache
writes) and the worker's own output folder. When the kernel refuses (no inotify, too many
watches, events lost), the folders it could not watch are reported as such and every file in
them counts as read: a stale result is worse than a model that runs again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

IN_OPEN = 0x00000020
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_MASK = IN_OPEN | IN_CREATE | IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
_READ_SIZE = 1 << 16

# Folder names never watched: version control, bytecode, tools' caches, JavaScript packages.
SKIPPED_NAMES = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache",
                           ".pytest_cache", ".ruff_cache", ".tox", ".nox", "node_modules"})
# A folder holding one of these is not the user's model code or data.
SKIPPED_MARKERS = ("pyvenv.cfg", "CACHEDIR.TAG")


@dataclass
class Opened:
    """What a watch saw: the files opened (absolute paths) and the folders it could not watch
    (every file in them counts as opened)."""

    files: set[str] = field(default_factory=set)
    unwatched: set[str] = field(default_factory=set)


def skipped(folder: Path, skip: frozenset[str]) -> bool:
    """A folder not watched (nor its subfolders): see the module's docstring."""
    if folder.name in SKIPPED_NAMES or str(folder) in skip:
        return True
    return any((folder / marker).exists() for marker in SKIPPED_MARKERS)


def folders(root: Path, skip: frozenset[str]) -> Iterator[Path]:
    """`root` and every folder below it that is watched (symlinks to folders not followed)."""
    for current, names, _ in os.walk(root):
        here = Path(current)
        if skipped(here, skip) and here != root:
            names[:] = []
            continue
        names[:] = [name for name in names if not skipped(here / name, skip)]
        yield here


class FolderWatch:
    """IN_OPEN watches on every folder of `root` from `start()` until `stop()`."""

    def __init__(self, root: Path, skip: Iterable[Path] = ()) -> None:
        self.root = root.resolve()
        self._skip = frozenset(str(path.resolve()) for path in skip)
        self._opened = Opened()
        self._folders: dict[int, Path] = {}
        self._fd = -1
        self._wake_read, self._wake_write = -1, -1
        self._thread: threading.Thread | None = None
        self._libc: ctypes.CDLL | None = None

    def start(self) -> None:
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc symbols
            self._fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):  # no libc or no inotify (not Linux)
            self._fd = -1
        if self._fd < 0:
            self._opened.unwatched.update(str(f) for f in folders(self.root, self._skip))
            return
        for folder in folders(self.root, self._skip):
            self._add(folder)
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._drain, name="onnx-parity-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> Opened:
        """Stop watching; what was opened until now (each event read before returning)."""
        if self._thread is not None:
            os.write(self._wake_write, b"x")
            self._thread.join()
            self._thread = None
        if self._fd >= 0:
            self._read_events()
            for fd in (self._fd, self._wake_read, self._wake_write):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fd = -1
        return self._opened

    def _add(self, folder: Path) -> None:
        assert self._libc is not None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
        if wd < 0:  # ENOSPC (max_user_watches) or a folder gone meanwhile
            if folder.is_dir():
                self._opened.unwatched.add(str(folder))
            return
        self._folders[wd] = folder

    def _drain(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._fd in ready:
                self._read_events()
            if self._wake_read in ready:
                return

    def _read_events(self) -> None:
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                self._lost()
                return
            if not data:
                return
            self._handle(data)

    def _handle(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size:offset + _EVENT.size + length]
            offset += _EVENT.size + length
            name = os.fsdecode(raw.split(b"\0", 1)[0])
            self._event(wd, mask, name)

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self._lost()
            return
        folder = self._folders.get(wd)
        if folder is None:
            return
        if mask & IN_IGNORED:  # the folder was deleted or moved away
            del self._folders[wd]
        elif mask & IN_ISDIR:
            if mask & IN_CREATE and not skipped(folder / name, self._skip):
                for new in folders(folder / name, self._skip):
                    self._add(new)  # files it gets may be opened after this
        elif mask & IN_OPEN and name:
            self._opened.files.add(str(folder / name))

    def _lost(self) -> None:
        """Events were dropped: every watched folder counts as read in full."""
        self._opened.unwatched.update(str(folder) for folder in self._folders.values())
