"""A figure in the JSON files: strict JSON has no NaN or Infinity, so a figure that is not a
finite number is written as the text "nan", "inf" or "-inf" and read back as that float.

Every figure of every file goes through here (json_values.encode for the dataclasses, and each
record written by hand), so one NaN in one model's numbers never stops the run's report.
It imports nothing of the report, so the typed dicts of the records can use it.
"""

from __future__ import annotations

import math
from typing import TypeAlias

# A figure as a file holds it: a number, its text when it is not finite, or None (not measured).
Figure: TypeAlias = float | str | None


def number_to_json(value: float | None) -> Figure:
    return None if value is None else figure_to_json(value)


def figure_to_json(value: float) -> float | str:
    """A figure that is always measured; "nan", "inf", "-inf" are what float() reads back."""
    return value if math.isfinite(value) else str(value)


def number_from_json(value: Figure) -> float | None:
    return float(value) if isinstance(value, str) else value


def figure_from_json(value: float | str) -> float:
    """A figure that is always measured (never None), as number_to_json wrote it."""
    return float(value)
