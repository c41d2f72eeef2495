"""Git LFS pointers: what a checkout without Git LFS leaves where a committed file should be.

A pointer is a small UTF-8 text file of `key value` lines: `version
https://git-lfs.github.com/spec/v1` first, then (sorted) `oid sha256:<64 hex>` and `size
<bytes>` (git-lfs/git-lfs docs/spec.md). Read as a sample, weights or golden file it would be
reported as a pickle or a corrupt file; every loader asks `file_pointer` (or `lfs_pointer` on
bytes it already holds) first and says what it really is, with the one fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.models.load_errors import LoadError

VERSION_LINE = "version https://git-lfs.github.com/spec/v1"
# git-lfs itself never takes a blob larger than this for a pointer; only this much is read.
MAX_POINTER_BYTES = 1024
LFS_FIX = ("Check out with `lfs: true` (actions/checkout) or run `git lfs pull`, then run the "
           "check again.")
NOT_FETCHED = "the checkout did not fetch Git LFS files"

_LINE = re.compile(r"([a-z0-9.-]+) ([^\r\n]+)")
_OID = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class LfsPointer:
    """A Git LFS pointer: the sha256 hex digest and the size in bytes of the file it stands for."""

    oid: str
    size: int

    def described(self) -> str:
        """`a Git LFS pointer to a 1,234-byte file (oid 0123456789ab...)`."""
        return f"a Git LFS pointer to a {self.size:,}-byte file (oid {self.oid[:12]}...)"


def lfs_pointer(data: bytes) -> LfsPointer | None:
    """The pointer `data` (a whole file's bytes) is, or None when it is any other content."""
    # Every line ends with a newline (the spec's MUST): a pointer cut short is not one.
    if (len(data) > MAX_POINTER_BYTES or not data.startswith(VERSION_LINE.encode() + b"\n")
            or not data.endswith(b"\n")):
        return None
    try:
        lines = data[:-1].decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    pairs = [_LINE.fullmatch(line) for line in lines]
    if not all(pairs):
        return None
    values = {match.group(1): match.group(2) for match in pairs if match}
    oid = _OID.fullmatch(values.get("oid", ""))
    size = values.get("size", "")
    if oid is None or not size.isascii() or not size.isdigit():
        return None
    return LfsPointer(oid.group(1), int(size))


def file_pointer(path: Path) -> LfsPointer | None:
    """The pointer the file at `path` is, reading only its first bytes; None for any other
    file, or one that cannot be opened (the loader then says why)."""
    try:
        with path.open("rb") as file:
            head = file.read(MAX_POINTER_BYTES + 1)
    except OSError:
        return None
    return lfs_pointer(head)


def pointer_message(what: str, pointer: LfsPointer) -> str:
    """`<what> is a Git LFS pointer to a N-byte file (oid ...), not the file itself: ...`."""
    return f"{what} is {pointer.described()}, not the file itself: {NOT_FETCHED}"


def refuse_pointer(path: Path, what: str) -> None:
    """Raise the load error of a Git LFS pointer if `path` is one; `what` names the file and
    its configuration key, e.g. 'weights "weights/m.pt" (config key `weights`)'."""
    pointer = file_pointer(path)
    if pointer is not None:
        raise LoadError(pointer_message(what, pointer), fix=LFS_FIX)
