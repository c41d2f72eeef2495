"""Every TOML example of the README and docs/ is a configuration the tool loads.

Each ```toml block (generated reference pages included) is written as a repository's
onnx-parity.toml and loaded by `load_settings`, where `onnx-parity check` starts: the file
parsed, every key checked against the schema. A block that is only part of a configuration says
so on its first line, a comment the reader sees too (docs/development.md):

- `# fragment of a [[model]]`: its keys set in a minimal [[model]] (a name, a factory and
  inputs, each where the block sets none), loaded;
- `# fragment of [[model]] "NAME"`: its keys set in the [[model]] NAME that a whole block of the
  same page declares (a key it sets replaced), loaded;
- `# fragment` followed by anything else: parsed with tomllib only (the reference's listing of
  every key, whose keys exclude each other).

Loading checks where sample files lie, not that they exist (settings/paths.py), so the
repositories hold only the configuration.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from onnx_parity.settings import ModelSpec, Settings, declared_keys, load_settings
from onnx_parity.settings.values import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*toml\b.*$", re.MULTILINE)
IN_A_MODEL = re.compile(r"# fragment of a \[\[model\]\]")
IN_NAMED_MODEL = re.compile(r'# fragment of \[\[model\]\] "(?P<name>[^"]+)"')
PARSED_ONLY = re.compile(r"# fragment\b")
MINIMAL_MODEL = {"name": "fragment", "factory": "models.net:build",
                 "inputs": {"input": "samples/input.npy"}}
SOURCES = ("factory", "transformers")
FIELDS = {key.name: key.field for key in declared_keys()}

Table = dict[str, Any]


@dataclass(frozen=True)
class Block:
    """One ```toml block: its page (relative to the repository), its fence's line, its text."""

    page: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found: list[Block] = []
    for fence in FENCE.finditer(text):
        indent, mark = fence.group("indent"), fence.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(mark[0])}{{{len(mark)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, fence.end())
        assert end is not None, f"{page}: the ```toml block at offset {fence.start()} is not closed"
        body = text[fence.end() + 1:end.start()]
        lines = [line.removeprefix(indent) for line in body.splitlines()]
        found.append(Block(page.relative_to(ROOT).as_posix(), text.count("\n", 0, fence.start()) + 1,
                           "\n".join(lines) + "\n"))
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]
WHOLE = [block for block in BLOCKS if not PARSED_ONLY.match(block.first_line)]
IN_MODEL = [block for block in BLOCKS if IN_A_MODEL.match(block.first_line)]
NAMED = [block for block in BLOCKS if IN_NAMED_MODEL.match(block.first_line)]
ONLY_PARSED = [block for block in BLOCKS if PARSED_ONLY.match(block.first_line)
               and block not in IN_MODEL and block not in NAMED]


def ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


def loaded(tmp_path: Path, block: Block, document: str) -> Settings:
    """`document` as the onnx-parity.toml of a fresh repository, loaded; a ConfigError fails
    the test naming the block."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "onnx-parity.toml").write_text(document, encoding="utf-8")
    try:
        return load_settings(repo)
    except ConfigError as error:
        pytest.fail(f"{block.where}: the example does not load:\n{error}\n\n{document}")


def assert_sets(model: ModelSpec, entry: Table, block: Block) -> None:
    """The model was loaded with every key the entry sets, as set by the user."""
    unset = sorted(key for key in entry if FIELDS[key] not in model.explicit)
    assert not unset, f"{block.where}: {unset} not loaded into model {model.name!r}"


def fragment_keys(block: Block) -> Table:
    """The block's keys as a [[model]]'s: its sub-table headers ([model.inputs]) apply too."""
    entries = tomllib.loads("[[model]]\n" + block.text)["model"]
    assert len(entries) == 1, f"{block.where}: a fragment holds no [[model]] of its own"
    return dict(entries[0])


def test_the_pages_hold_toml_examples_and_every_fence_is_read() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert len(blocks_of(page)) == len(re.findall(r"^[ \t]*```toml", text, re.MULTILINE))
    assert len(BLOCKS) >= 25
    assert {block.page for block in BLOCKS} >= {"README.md", "docs/reference/configuration.md"}


@pytest.mark.parametrize("block", WHOLE, ids=ids(WHOLE))
def test_a_whole_example_loads(tmp_path: Path, block: Block) -> None:
    settings = loaded(tmp_path, block, block.text)
    entries = tomllib.loads(block.text)["model"]
    assert len(settings.models) == len(entries)
    for model, entry in zip(settings.models, entries, strict=True):
        assert_sets(model, entry, block)


@pytest.mark.parametrize("block", IN_MODEL, ids=ids(IN_MODEL))
def test_a_model_fragment_loads_in_a_minimal_model(tmp_path: Path, block: Block) -> None:
    keys = fragment_keys(block)
    model = {**{key: value for key, value in MINIMAL_MODEL.items()
                if key not in keys and not (key == "factory" and set(SOURCES) & set(keys))},
             **keys}
    settings = loaded(tmp_path, block, tomlkit.dumps({"model": [model]}))
    assert_sets(settings.models[0], keys, block)


@pytest.mark.parametrize("block", NAMED, ids=ids(NAMED))
def test_a_named_model_fragment_loads_in_that_model(tmp_path: Path, block: Block) -> None:
    marker = IN_NAMED_MODEL.match(block.first_line)
    assert marker is not None
    name = marker.group("name")
    document, entry = named_model(block, name)
    keys = fragment_keys(block)
    entry.update(keys)
    settings = loaded(tmp_path, block, tomlkit.dumps(document))
    model = next(model for model in settings.models if model.name == name)
    assert_sets(model, keys, block)


def named_model(block: Block, name: str) -> tuple[Table, Table]:
    """A copy of the whole example of `block`'s page that declares [[model]] `name`, and that
    model's entry in it."""
    found = []
    for whole in WHOLE:
        document = tomllib.loads(whole.text) if whole.page == block.page else {}
        found += [(document, entry) for entry in document.get("model", [])
                  if entry.get("name") == name]
    assert len(found) == 1, (f'{block.where}: {len(found)} whole examples of {block.page} '
                             f'declare [[model]] "{name}"; the fragment needs exactly one')
    document = copy.deepcopy(found[0][0])
    return document, next(entry for entry in document["model"] if entry["name"] == name)


@pytest.mark.parametrize("block", ONLY_PARSED, ids=ids(ONLY_PARSED))
def test_any_other_fragment_is_toml(block: Block) -> None:
    assert tomllib.loads(block.text), f"{block.where}: an empty fragment"
