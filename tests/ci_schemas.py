"""The vendored SARIF 2.1.0 and JUnit schemas (tests/schemas/README.md says where they came from)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema
import xmlschema

SCHEMAS = Path(__file__).resolve().parent / "schemas"


@cache
def sarif_validator() -> jsonschema.Draft4Validator:
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


@cache
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))


def sarif_errors(document: object) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in sarif_validator().iter_errors(document)]


def junit_errors(path: Path) -> list[str]:
    return [str(error) for error in junit_schema().iter_errors(str(path))]
