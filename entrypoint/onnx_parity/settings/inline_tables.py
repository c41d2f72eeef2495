"""An inline table spread over several lines, told as such, with the form that loads.

TOML 1.0 allows an inline table `{ ... }` on one line only. Written over several lines (the
natural layout of a long `inputs` or `dynamic-axes`), tomllib stops at the first line break
inside it with "Invalid initial character for a key part", which says nothing of the cause.
When the spot tomllib names lies inside a `{` whose `}` is on a later line, the message here
says so and shows that very table as a sub-table, one key per line (or, for an inline table
that is an array's item, on one line). Only reading: settings/config_file.py raises.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

_SPOT = re.compile(r"\(at line (\d+), column (\d+)\)$")
_HEADER = re.compile(
    r"^[ \t]*(?P<open>\[\[?)[ \t]*(?P<path>[^\[\]\n]*?)[ \t]*\]\]?[ \t]*$", re.MULTILINE)
_KEY = re.compile(r"\s*(?P<key>\S.*?)\s*=\s*")
_QUOTES = ('"""', "'''", '"', "'")


@dataclass(frozen=True)
class SpreadTable:
    """An inline table written over several lines, and what it holds."""

    key: str  # the key as written (`dynamic-axes`), "" for an array's item
    header: str  # the path of the table it stands in (`model`), "" at the top level
    entry: str  # that table's header as written (`[[model]]`), "" at the top level
    first_line: int  # 1-based, the line of its `{`
    last_line: int  # the line of its `}`
    entries: tuple[str, ...]  # each key = value of the table, on one line


def spread_table_message(label: str, text: str, error: str) -> str | None:
    """The message for tomllib's `error` on `text` when its cause is a spread inline table."""
    spread = spread_table(text, error)
    if spread is None:
        return None
    lines = f"lines {spread.first_line}-{spread.last_line}"
    if not spread.key:
        one_line = "{ " + ", ".join(spread.entries) + " }"
        return (f"{label}: line {spread.first_line}: an inline table in an array spans {lines}, "
                "and TOML allows an inline table `{ ... }` on one line only (tomllib says: "
                f"{_reason(error)}). Write it on one line:\n\n{one_line}\n")
    header = f"[{spread.header}.{spread.key}]" if spread.header else f"[{spread.key}]"
    form = "\n".join((header, *spread.entries))
    return (f"{label}: line {spread.first_line}: the inline table of `{spread.key}` spans "
            f"{lines}, and TOML allows an inline table `{{ ... }}` on one line only (tomllib "
            f"says: {_reason(error)}). Write it on one line, or as a sub-table, one key per "
            f"line, {_placement(spread.entry)} (the keys below a header belong to its table up "
            f"to the next header):\n\n{form}\n")


def spread_table(text: str, error: str) -> SpreadTable | None:
    """The inline table that holds the spot of tomllib's `error`, when it spans lines."""
    spot = _SPOT.search(error)
    if spot is None:
        return None
    offset = _offset(text, int(spot.group(1)), int(spot.group(2)))
    scan = _Scan(text)
    opening = scan.open_brace_at(offset)
    if opening is None:
        return None
    closing, commas, breaks = scan.table_from(opening)
    if closing is None or not breaks:
        return None
    entries = _entries(scan.code, opening, commas, closing)
    key = _key(scan, opening)
    if key is None or not _loads(entries):
        return None
    path, entry = scan.header_before(opening)
    return SpreadTable(key=key, header=path, entry=entry,
                       first_line=text.count("\n", 0, opening) + 1,
                       last_line=text.count("\n", 0, closing) + 1, entries=entries)


def _key(scan: _Scan, opening: int) -> str | None:
    """The key whose value the `{` at `opening` is, "" for an array's item, None for neither."""
    if not scan.starts_statement(opening):
        return ""
    key = _KEY.fullmatch(scan.code, scan.code.rfind("\n", 0, opening) + 1, opening)
    return key.group("key") if key else None


def _offset(text: str, line: int, column: int) -> int:
    """tomllib's 1-based line and column as an offset into `text`."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    return start + column - 1


def _reason(error: str) -> str:
    return _SPOT.sub("", error).strip()


def _placement(entry: str) -> str:
    if not entry:
        return "after the other top-level keys, before the first [[model]]"
    return f"after the other keys of this {entry} entry"


def _entries(code: str, opening: int, commas: list[int], closing: int) -> tuple[str, ...]:
    """Each entry between the table's braces, its lines joined, its comments left out."""
    bounds = [opening, *commas, closing]
    pieces = (code[start + 1:end] for start, end in pairwise(bounds))
    joined = (" ".join(line.strip() for line in piece.splitlines()).strip() for piece in pieces)
    return tuple(entry for entry in joined if entry)


def _loads(entries: tuple[str, ...]) -> bool:
    """Whether the entries are the table's keys and values: the same table on one line and as
    a sub-table, one per line (the form shown must load)."""
    try:
        one_line = tomllib.loads("table = { " + ", ".join(entries) + " }")
        sub_table = tomllib.loads("\n".join(("[table]", *entries)))
    except tomllib.TOMLDecodeError:
        return False
    return bool(entries) and one_line == sub_table


class _Scan:
    """The TOML text's brackets, commas and line breaks outside strings and comments."""

    def __init__(self, text: str) -> None:
        self.code = _without_comments(text)
        self.marks = list(_structure(self.code))

    def open_at(self, offset: int) -> list[tuple[str, int]]:
        """The brackets still open at `offset`, outermost first, with their offsets."""
        stack: list[tuple[str, int]] = []
        for position, char in self.marks:
            if position >= offset:
                break
            if char in "{[":
                stack.append((char, position))
            elif char in "}]" and stack:
                stack.pop()
        return stack

    def open_brace_at(self, offset: int) -> int | None:
        """The outermost `{` still open at `offset`, or none."""
        return next((position for char, position in self.open_at(offset) if char == "{"), None)

    def table_from(self, opening: int) -> tuple[int | None, list[int], bool]:
        """The matching `}` of the `{` at `opening`, the commas at its own level, whether a
        line break lies between them."""
        depth, breaks = 0, False
        commas: list[int] = []
        for position, char in self.marks:
            if position < opening:
                continue
            if char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    return position, commas, breaks
            elif char == "," and depth == 1:
                commas.append(position)
            breaks = breaks or char == "\n"
        return None, commas, breaks

    def starts_statement(self, opening: int) -> bool:
        """Whether nothing is open before the `{` at `opening` (it is a key's value)."""
        return not self.open_at(opening)

    def header_before(self, opening: int) -> tuple[str, str]:
        """The path of the last table header above `opening` (`model`) and that header
        (`[[model]]`), or "" and "" at the top level."""
        headers = [found for found in _HEADER.finditer(self.code, 0, opening)
                   if not self.open_at(found.start())]
        if not headers:
            return "", ""
        path, opened = headers[-1].group("path", "open")
        return path, f"{opened}{path}{opened.replace('[', ']')}"


def _structure(code: str) -> Iterator[tuple[int, str]]:
    """(offset, character) of every bracket, comma and line break outside strings."""
    position = 0
    while position < len(code):
        quote = next((mark for mark in _QUOTES if code.startswith(mark, position)), None)
        if quote is not None:
            position = _string_end(code, position, quote)
            continue
        if code[position] in "{}[],\n":
            yield position, code[position]
        position += 1


def _string_end(code: str, start: int, quote: str) -> int:
    """The offset just past the string that opens at `start` with `quote`."""
    position = start + len(quote)
    while position < len(code):
        if quote[0] == '"' and code[position] == "\\":
            position += 2
            continue
        if code.startswith(quote, position):
            return position + len(quote)
        if len(quote) == 1 and code[position] == "\n":
            return position  # an unclosed one-line string ends at its line
        position += 1
    return position


def _without_comments(text: str) -> str:
    """`text` with every comment blanked out, so offsets stay those of the file."""
    kept: list[str] = []
    position = 0
    while position < len(text):
        quote = next((mark for mark in _QUOTES if text.startswith(mark, position)), None)
        if quote is not None:
            end = _string_end(text, position, quote)
            kept.append(text[position:end])
            position = end
        elif text[position] == "#":
            end = text.find("\n", position)
            end = len(text) if end < 0 else end
            kept.append(" " * (end - position))
            position = end
        else:
            kept.append(text[position])
            position += 1
    return "".join(kept)
