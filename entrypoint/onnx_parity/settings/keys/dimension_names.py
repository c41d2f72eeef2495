"""A dimension of `dynamic-axes` as written: a name, or a linear expression of one other name.

`"past + 1"`, `"total - 1"`, `"2 * frames"` and `"2 * frames + 1"` are what torch.export's derived
dimensions express (`Dim("past") + 1`, `2 * Dim("frames") + 1`): the axis is `scale * root +
offset` long whenever the root is `root` long. The operators are written with spaces, as the
examples are; a label without a space (`seq-len`, `n_mels`) stays a plain name, and one with a
space that is not such an expression is refused rather than read as a name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_LINEAR = re.compile(rf"(?:(?P<scale>[0-9]{{1,6}}) \* )?(?P<root>{_NAME})"
                     r"(?: (?P<sign>[+-]) (?P<offset>[0-9]{1,6}))?")
EXPRESSION_FORMS = '"past + 1", "total - 1", "2 * frames", "2 * frames + 1"'


@dataclass(frozen=True)
class Linear:
    """`scale * root + offset`: an axis whose length follows another dimension's."""

    root: str
    scale: int = 1
    offset: int = 0

    def __str__(self) -> str:
        scaled = self.root if self.scale == 1 else f"{self.scale} * {self.root}"
        if self.offset == 0:
            return scaled
        return f"{scaled} {'+' if self.offset > 0 else '-'} {abs(self.offset)}"

    def length(self, root_length: int) -> int:
        """The axis's length when the root is `root_length` long."""
        return self.scale * root_length + self.offset

    def root_length(self, length: int) -> int | None:
        """The root's length that gives this axis `length`; None when no length does."""
        base = length - self.offset
        if base < 0 or base % self.scale:
            return None
        return base // self.scale

    def smallest_root(self) -> int:
        """The shortest root for which the axis is at least 1 long (0: the root may be empty)."""
        return max(0, -(-(1 - self.offset) // self.scale))


def parse_dimension(label: str) -> Linear | None:
    """The expression a label states, or None for a plain name; ValueError when it has spaces
    but is no expression of the forms above (the message says which)."""
    if " " not in label.strip():
        return None
    match = _LINEAR.fullmatch(label.strip())
    if match is None:
        raise ValueError(f'"{label}" is neither a dimension name (no spaces) nor a linear '
                         f"expression of one, written with spaced operators ({EXPRESSION_FORMS})")
    scale = int(match["scale"] or 1)
    offset = int(match["offset"] or 0) * (-1 if match["sign"] == "-" else 1)
    if scale < 1:
        raise ValueError(f'"{label}": the factor must be at least 1')
    if scale == 1 and offset == 0:
        return None  # "past" written with spaces around it is the name itself
    return Linear(match["root"], scale, offset)
