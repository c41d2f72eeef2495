"""Where in the user's repository something happened, and text without this machine's paths.

One place answers "which file and line can the user act on" for every kind of evidence: a
Python traceback, the text of an exporter's error, a faulthandler stack dump, the stack of a
running call. The answer is
the innermost frame that lies inside the repository and not inside an installed package
(`site-packages`), as a path relative to the repository root.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import traceback
from collections.abc import Iterable
from pathlib import Path

FRAME_TEXT = re.compile(r'File "([^"]+)", line (\d+)')
INSTALLED = ("site-packages", "dist-packages")
# Installed packages: shown from site-packages on, not from this machine's prefix.
SITE_PACKAGES = re.compile(r'[^\s"\']*/(site-packages|dist-packages)/')
# Any other absolute path (the interpreter's standard library, a temporary folder, a home):
# two or more segments after a leading slash that no word, dot or slash precedes.
ABSOLUTE_PATH = re.compile(r'(?<![\w.:/~-])/(?:[^\s"\'<>()\[\]:,;|]+/)+[^\s"\'<>()\[\]:,;|]*')
# What tells a machine path from an ONNX node name (`/layer1/conv/Conv`): a top-level folder
# of a Unix-like machine or runner, or a file name with an extension.
MACHINE_ROOTS = frozenset((
    "home", "usr", "tmp", "opt", "root", "var", "work", "github", "proc", "etc", "lib", "lib64",
    "private", "Users", "mnt", "srv", "nix", "run", "snap", "__w", "runner", "workspace",
    "builds", "Library", "System", "Volumes", "dev", "sys", "app",
))
FILE_NAME = re.compile(r"[\w-]+\.[A-Za-z]\w*")

Location = tuple[str | None, int | None]
NOWHERE: Location = (None, None)


@functools.lru_cache(maxsize=4096)
def repo_relative(path: str, repo: Path) -> str | None:
    """`path` relative to the repository, or None when it lies outside or in a package.
    Remembered: a localisation asks for the same few files once per frame of every module's
    call (each answer resolves both paths on disk)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return None
    try:
        relative = candidate.resolve().relative_to(repo.resolve())
    except (ValueError, OSError):
        return None
    if any(part in INSTALLED for part in relative.parts):
        return None
    return relative.as_posix()


def innermost_user_frame(frames: Iterable[tuple[str, int]], repo: Path) -> Location:
    """The last frame (frames listed outermost first) that is the user's code."""
    found = NOWHERE
    for path, line in frames:
        relative = repo_relative(path, repo)
        if relative is not None:
            found = (relative, line)
    return found


def traceback_frames(error: BaseException) -> list[tuple[str, int]]:
    """The frames of an exception's traceback, outermost first."""
    frames = traceback.extract_tb(error.__traceback__)
    return [(frame.filename, frame.lineno or 0) for frame in frames]


def live_frames() -> list[tuple[str, int]]:
    """The frames of the running code that called this function, outermost first: a stack
    read while the user's model runs (a forward hook's callers)."""
    frames = []
    here = inspect.currentframe()
    frame = here.f_back if here is not None else None
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno or 0))
        frame = frame.f_back
    return frames[::-1]


def text_frames(text: str) -> list[tuple[str, int]]:
    """`File "...", line N` references in the order the text gives them."""
    return [(path, int(line)) for path, line in FRAME_TEXT.findall(text)]


def error_location(error: BaseException, repo: Path) -> Location:
    """The user's innermost line in a raised exception's traceback."""
    return innermost_user_frame(traceback_frames(error), repo)


def stack_dump_location(lines: Iterable[str], repo: Path) -> Location:
    """The user's innermost line in a faulthandler dump, which lists the most recent call first."""
    frames = [frame for line in lines for frame in text_frames(line)]
    return innermost_user_frame(reversed(frames), repo)


def scrub_paths(text: str, roots: Iterable[Path]) -> str:
    """No machine paths in what gets published: the roots become relative, packages short,
    and any other absolute path is cut to its file name (`…/inspect.py`)."""
    for root in roots:
        for form in dict.fromkeys((str(root.resolve()), str(root))):
            text = text.replace(form + os.sep, "").replace(form, ".")
    return ABSOLUTE_PATH.sub(_short_path, SITE_PACKAGES.sub(r"\1/", text))


def _short_path(match: re.Match[str]) -> str:
    path = match.group()
    parts = [part for part in path.split("/") if part]
    if not parts or not (parts[0] in MACHINE_ROOTS or FILE_NAME.fullmatch(parts[-1])):
        return path  # an ONNX node name or a scope, not a place on this machine
    return "…/" + parts[-1]


def shorten(text: str, limit: int) -> str:
    """One line of at most `limit` characters, cut between words (never inside a path, which
    would then escape scrubbing as a fragment), ending with "..." when cut."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit - 3)
    return (line[:cut] if cut > 0 else line[: limit - 3]) + "..."


def source_line(repo: Path, file: str, line: int) -> str | None:
    """The stripped text of `file:line` in the repository, or None when it cannot be read."""
    try:
        lines = (repo / file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1].strip() if 0 < line <= len(lines) else None
