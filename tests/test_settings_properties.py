"""Whatever a pull request puts in the configuration, load_settings returns Settings or raises
ConfigError with a one-line message naming the file; no other exception escapes."""

from __future__ import annotations

import datetime
import json
import math
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnx_parity.settings.loading import ALLOW_WARNING_KEYS, MODEL_KEYS, TOP_KEYS, load_settings
from onnx_parity.settings.schema import Key, Settings, declared_keys
from onnx_parity.settings.values import ConfigError

PROPERTY = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

NEAR_MISSES = ["atoll", "batch_sizes", "Name", "factry", "input", "output", "dynamic_axes",
               "allow_warnings", "models", "exporters", "timeout", "memory-limit", "matches", ""]
KEYS = st.sampled_from([*TOP_KEYS, *MODEL_KEYS, *ALLOW_WARNING_KEYS, *NEAR_MISSES]) | st.text(max_size=6)
TEXT = st.text(max_size=12)
SCALARS = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | TEXT
           | st.dates() | st.datetimes())
ANY = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
PATHS = st.sampled_from(["samples/a.npy", "s/b.npz", "w.pt", "w.pth", "x.pb", "zoo/test_data_set_0",
                         "../up.pt", "/abs.npy", "~/h.npy", "a\\b.npy", "", ".", "x.txt", "a/../b.pt",
                         "a\x00.npy", "C:/w.pt"]) | TEXT
NAMES = st.sampled_from(["input", "logits", "x", "", "small-cnn", ".h", "a/b"]) | TEXT


def mostly(valid: st.SearchStrategy, weird: st.SearchStrategy) -> st.SearchStrategy:
    """Usually a valid value, sometimes a wrong one: so that errors occur at every depth."""
    return st.integers(0, 19).flatmap(lambda roll: weird if roll == 0 else valid)


LETTERS = st.text("abcdefghij ", min_size=1, max_size=8)
# Richer strategies for the declared keys; a key declared without one here is drawn from its
# declared example (valid) and from anything at all (weird): every key is in the property.
SHAPED_VALID = {
    "opset": st.integers(7, 23),
    "exporter": st.sampled_from(["auto", "dynamo", "torchscript", ["torchscript", "dynamo"], ["dynamo"]]),
    "atol": st.floats(0, 1) | st.integers(0, 3),
    "rtol": st.floats(0, 1) | st.integers(0, 3),
    "batch-sizes": st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
    "timeout-seconds": st.floats(0.1, 1e4) | st.integers(1, 1000),
    "memory-limit-mb": st.integers(1, 10**6),
    "variants": st.lists(st.sampled_from(["int8-dynamic", "int8-static", "fp16"]), max_size=3,
                         unique=True),
    "calibration": st.sampled_from(["minmax", "entropy", "percentile"]),
    "min-sqnr-db": st.floats(-10, 80) | st.integers(0, 60),
    "min-top1-agreement": st.floats(0, 1) | st.integers(0, 1),
    "drift-warning-ratio": st.floats(1, 1e6) | st.integers(1, 100),
    "name": st.from_regex(r"[a-z][a-z0-9._-]{0,10}", fullmatch=True),
    "factory": st.from_regex(r"[a-z_][a-z0-9_]{0,5}(\.[a-z_]{1,4})?:[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True),
    "weights": st.sampled_from(["w.pt", "weights/m.pth", "a/../w.pt"]),
    "inputs": st.sampled_from(["s/all.npz", "s/all.pt", "zoo/test_data_set_0"])
    | st.dictionaries(st.sampled_from(["input", "x", "y"]),
                      st.sampled_from(["s/a.npy", "s/b.npz", "s/c.pt", "s/d.pb"]), min_size=1, max_size=2),
    "outputs": st.lists(st.sampled_from(["logits", "y", "z"]), min_size=1, max_size=2, unique=True),
    "dynamic-axes": st.dictionaries(
        st.sampled_from(["input", "x", "logits", "y"]),
        st.dictionaries(st.sampled_from(["0", "1", "2"]), st.sampled_from(["batch", "seq"]), min_size=1),
        max_size=2,
    ),
    "allow-warnings": st.lists(st.fixed_dictionaries({"match": LETTERS, "reason": LETTERS}), max_size=2),
    "runtime-optimization": st.sampled_from(["disabled", "basic", "extended", "all"]),
    "axis-sizes": st.dictionaries(
        st.sampled_from(["input", "x", "y"]),
        st.dictionaries(st.sampled_from(["1", "2"]),
                        st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True), min_size=1),
        max_size=2,
    ),
}
SHAPED_WEIRD = {
    "opset": st.integers(-5, 40) | st.floats(),
    "exporter": st.sampled_from(["dynamoo", "", "auto "])
    | st.lists(st.sampled_from(["dynamo", "torchscript", "auto", "x"]), max_size=3),
    "atol": st.floats() | st.integers(-2, 2),
    "rtol": st.floats() | st.integers(-2, 2),
    "batch-sizes": st.lists(st.integers(-2, 9) | st.floats(), max_size=4),
    "timeout-seconds": st.floats() | st.integers(-5, 0),
    "memory-limit-mb": st.integers(-5, 0) | st.floats(),
    "variants": st.lists(st.sampled_from(["int8", "fp16", "fp16", "int8_static"]) | ANY,
                         max_size=3) | ANY,
    "calibration": st.sampled_from(["MinMax", "histogram", ""]) | ANY,
    "min-sqnr-db": st.floats() | TEXT,
    "min-top1-agreement": st.floats() | st.integers(-1, 3),
    "drift-warning-ratio": st.floats() | st.integers(-5, 0),
    "name": NAMES,
    "factory": st.sampled_from(["bad", ":x", "m:", "1a:b", "a..b:c", "m:f:g"]) | TEXT,
    "weights": PATHS,
    "inputs": PATHS | st.dictionaries(NAMES, PATHS | ANY, max_size=3),
    "outputs": st.lists(NAMES | ANY, max_size=3),
    "dynamic-axes": st.dictionaries(
        NAMES, st.dictionaries(st.sampled_from(["-1", "x", "9999", ""]) | TEXT, NAMES | ANY, max_size=2)
        | ANY, max_size=3,
    ),
    "allow-warnings": st.lists(
        st.dictionaries(st.sampled_from([*ALLOW_WARNING_KEYS, "reasn"]), TEXT | ANY, max_size=3) | ANY,
        max_size=2,
    ),
    "runtime-optimization": st.sampled_from(["all ", "none", "ORT_ENABLE_ALL", ""]) | TEXT,
    "axis-sizes": st.dictionaries(
        NAMES, st.dictionaries(st.sampled_from(["0", "-1", "x", "1"]) | TEXT,
                               st.lists(st.integers(-2, 9) | st.floats() | ANY, max_size=3) | ANY,
                               max_size=2) | ANY, max_size=3,
    ),
}


def example_value(key: Key) -> object:
    return tomllib.loads(key.example)[key.name]


VALID = {key.name: SHAPED_VALID.get(key.name, st.just(example_value(key)))
         for key in declared_keys()}
WEIRD = {key.name: SHAPED_WEIRD.get(key.name, ANY) for key in declared_keys()}
REQUIRED = tuple(key.name for key in declared_keys() if key.default is None)


def value_for(key: str) -> st.SearchStrategy:
    return mostly(VALID[key], WEIRD[key] | ANY)


def table_of(required: tuple[str, ...], optional: tuple[str, ...]) -> st.SearchStrategy[dict]:
    known = st.fixed_dictionaries({key: value_for(key) for key in required},
                                  optional={key: value_for(key) for key in optional})
    extra = mostly(st.just({}), st.dictionaries(KEYS, ANY, max_size=1))
    dropped = mostly(st.none(), st.sampled_from(required or (None,)))
    return st.builds(lambda a, b, drop: {k: v for k, v in {**b, **a}.items() if k != drop},
                     known, extra, dropped)


OVERRIDES = tuple(key for key in TOP_KEYS if key != "model")
MODELS = st.lists(mostly(table_of(REQUIRED, tuple(k for k in MODEL_KEYS if k not in REQUIRED)), ANY),
                  min_size=1, max_size=3)
DOCUMENTS = mostly(
    st.builds(lambda top, models: {**top, "model": models}, table_of((), OVERRIDES), mostly(MODELS, ANY)),
    st.dictionaries(KEYS, ANY, max_size=4),
)


def toml_value(value: object) -> str:
    """Inline TOML for a value hypothesis built (tomllib has no writer)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(table: dict) -> str:
    return "".join(f"{json.dumps(k, ensure_ascii=False)} = {toml_value(v)}\n" for k, v in table.items())


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("repo")


def outcome(repo: Path, config: Path) -> Settings | str:
    """load_settings' result, or its ConfigError message; any other exception fails the test.
    The message is one line, but for an inline table spread over lines, whose message shows
    the table's TOML form after a blank line."""
    try:
        return load_settings(repo, config)
    except ConfigError as error:
        message = str(error)
        said, _, form = message.partition("\n\n")
        assert "\n" not in said, message
        assert message.startswith(config.name), message
        if form:
            assert "spans lines" in said, message
            tomllib.loads(form if form.startswith("[") else f"item = {form}")
        return message


def test_every_declared_key_has_a_valid_example_and_the_refinements_name_declared_keys() -> None:
    names = {key.name for key in declared_keys()}
    assert set(SHAPED_VALID) <= names
    assert set(SHAPED_WEIRD) <= names
    assert REQUIRED == ("name", "inputs")  # and one of factory, transformers
    for key in declared_keys():
        assert example_value(key) is not None, key.name


@PROPERTY
@given(document=DOCUMENTS, in_pyproject=st.booleans())
def test_random_documents_give_settings_or_config_error(
    repo: Path, document: dict, in_pyproject: bool
) -> None:
    if in_pyproject:
        config = repo / "pyproject.toml"
        config.write_text(toml_document({"tool": {"onnx-parity": document}}), encoding="utf-8")
    else:
        config = repo / "onnx-parity.toml"
        config.write_text(toml_document(document), encoding="utf-8")
    result = outcome(repo, config)
    if isinstance(result, Settings):
        assert result.models
        assert all(model.name for model in result.models)
        assert all(path.is_relative_to(repo.resolve()) for model in result.models
                   for path in ([model.inputs] if isinstance(model.inputs, Path) else model.inputs.values()))


@PROPERTY
@given(text=st.text(max_size=200) | st.lists(st.sampled_from(
    ["[[model]]", 'name = "m"', 'factory = "a:b"', 'inputs = "x.npz"', "atol = 1e-5", "[model]",
     "opset = ", "= 3", '"""', "[[model.allow-warnings]]", 'match = "w"', "[tool]", "x.y = 1",
     'inputs = { x = "a.npy",', 'y = "b.npz" }', "env = {", 'A = "1" }', "# c", "{", "}",
     'allow-warnings = [{ match = "w",', 'reason = "r" }]']),
    max_size=10).map("\n".join))
def test_random_text_gives_settings_or_config_error(repo: Path, text: str) -> None:
    config = repo / "onnx-parity.toml"
    config.write_text(text, encoding="utf-8")
    outcome(repo, config)


@PROPERTY
@given(data=st.binary(max_size=100))
def test_random_bytes_give_settings_or_config_error(repo: Path, data: bytes) -> None:
    config = repo / "onnx-parity.toml"
    config.write_bytes(data)
    outcome(repo, config)
