"""GitHub's official OpenAPI description, cut to the operations onnx-parity uses, as a validator.

The description comes from the npm package `@octokit/openapi` (pinned below) at test time:
`npm pack` downloads it, `generated/api.github.com.json` (13 MB) is cut to our operations and
every schema they reference, and the cut file is cached in `.ci-cache/openapi/` at the
repository root (gitignored). Nothing of it is committed. Without npm or the registry the
contract cannot be checked, and the tests say so and fail: a silent skip would let the fake
drift from GitHub.

OpenAPI 3.0 schemas are JSON Schema draft 4 plus `nullable`; `nullable: true` is rewritten to
a JSON Schema null alternative when the cut is made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT4

from npm_packages import PackageUnavailable, npm_member

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
MEMBER = "package/generated/api.github.com.json"
CACHE = Path(__file__).resolve().parents[1] / ".ci-cache" / "openapi"
OPERATIONS = {
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("GET", "/user"),
    ("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"),
}
DOC_URI = "urn:onnx-parity:github-openapi"


# The OpenAPI description could not be obtained; the text says why and what to install.
ContractUnavailable = PackageUnavailable


@dataclass(frozen=True)
class Operation:
    method: str
    template: str

    @property
    def pointer(self) -> str:
        escaped = self.template.replace("~", "~0").replace("/", "~1")
        return f"#/paths/{escaped}/{self.method.lower()}"


class Contract:
    def __init__(self, document: dict) -> None:
        self.document = document
        self._registry = Registry().with_resource(
            DOC_URI, DRAFT4.create_resource(document))

    def operation(self, method: str, path: str) -> Operation:
        """The described operation a concrete request path belongs to."""
        for op_method, template in OPERATIONS:
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
            if op_method == method and re.fullmatch(pattern, path):
                return Operation(op_method, template)
        raise AssertionError(f"{method} {path} is not an operation the contract covers")

    def validate_request(self, method: str, path: str, body: object) -> None:
        op = self.operation(method, path)
        described = self._spec(op).get("requestBody")
        if described is None:
            assert body is None, f"{method} {path} sends a body the API does not describe"
            return
        self._validate(body, f"{op.pointer}/requestBody/content/application~1json/schema")

    def validate_response(self, method: str, path: str, status: int, body: object) -> bool:
        """Validate a JSON answer; False when the description has no schema for that status.

        GitHub's description leaves out rate-limit answers and 5xx pages, so those say False.
        """
        op = self.operation(method, path)
        responses = self._spec(op)["responses"]
        if str(status) not in responses:
            return False
        response = self._deref(responses[str(status)])
        if "application/json" not in response.get("content", {}):
            return False
        code = str(status)
        pointer = f"{op.pointer}/responses/{code}"
        if "$ref" in responses[code]:
            pointer = responses[code]["$ref"]
        self._validate(body, f"{pointer}/content/application~1json/schema")
        return True

    def _spec(self, op: Operation) -> dict:
        return self.document["paths"][op.template][op.method.lower()]

    def _deref(self, node: dict) -> dict:
        while "$ref" in node:
            node = _resolve(self.document, node["$ref"])
        return node

    def _validate(self, instance: object, pointer: str) -> None:
        validator = jsonschema.Draft4Validator({"$ref": f"{DOC_URI}{pointer}"},
                                               registry=self._registry)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            details = "; ".join(f"at {list(e.absolute_path)}: {e.message[:300]}"
                                for e in errors[:5])
            raise AssertionError(f"does not match GitHub's OpenAPI ({pointer}): {details}")


def load_contract(cache: Path = CACHE) -> Contract:
    """The cut description, from the cache or freshly from npm; ContractUnavailable if neither."""
    cut_file = cache / f"api.github.com-{VERSION}-cut.json"
    if not cut_file.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = cut_file.with_suffix(".partial")
        partial.write_text(json.dumps(cut(_download(cache))), encoding="utf-8")
        partial.replace(cut_file)  # atomic: a crash never leaves a truncated cache behind
    return Contract(json.loads(cut_file.read_text(encoding="utf-8")))


def _download(cache: Path) -> dict:
    text = npm_member(PACKAGE, VERSION, MEMBER, cache,
                      "the fake GitHub cannot be checked against GitHub's OpenAPI description")
    return json.loads(text)


def cut(full: dict) -> dict:
    """Keep our operations and the components they reference, transitively."""
    paths: dict[str, dict] = {}
    for method, template in sorted(OPERATIONS):
        paths.setdefault(template, {})[method.lower()] = full["paths"][template][method.lower()]
    components: dict[str, dict] = {}
    pending = list(_refs(paths))
    while pending:
        ref = pending.pop()
        _, _, kind, name = ref.split("/", 3)
        if name in components.setdefault(kind, {}):
            continue
        components[kind][name] = full["components"][kind][name]
        pending.extend(_refs(components[kind][name]))
    document = {"openapi": full["openapi"], "info": full["info"], "paths": paths,
                "components": components}
    return _nullable_to_json_schema(document)


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def _nullable_to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable_to_json_schema(value) for value in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable_to_json_schema(value) for key, value in node.items()}
    if node.get("nullable") is not True:
        return node
    del node["nullable"]
    if isinstance(node.get("type"), str) and "$ref" not in node:
        node["type"] = [node["type"], "null"]
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
        return node
    return {"anyOf": [node, {"type": "null"}]}


def _resolve(document: dict, ref: str) -> dict:
    node: Any = document  # parsed JSON
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    assert isinstance(node, dict), ref
    return node
