"""The `[[model]]` entry `onnx-parity init` appends, as TOML text.

Written as text, not through a TOML library, so the file it is appended to keeps every byte
and comment: only inline tables are used, which are valid after any existing table. Strings
are TOML basic strings (JSON's escapes are a subset of TOML's).
"""

from __future__ import annotations

import json
import re

from onnx_parity.settings.config_file import PYPROJECT_TABLE

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def model_entry(header: str, values: list[tuple[str, object]], comment: str) -> str:
    """`[[header]]`, a comment line, then one `key = value` line per value (None left out)."""
    lines = [f"[[{header}]]", *(f"# {line}" for line in comment.splitlines())]
    lines += [f"{key} = {toml_value(value)}" for key, value in values if value is not None]
    return "\n".join(lines) + "\n"


def entry_header(in_pyproject: bool) -> str:
    return f"tool.{PYPROJECT_TABLE}.model" if in_pyproject else "model"


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
