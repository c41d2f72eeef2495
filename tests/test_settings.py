"""load_settings on real files in temporary repositories: the lookup, every validation case
and its message (file, place, key and fix), and the path rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from onnx_parity.settings.keys import checks
from onnx_parity.settings.loading import load_settings
from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.values import ConfigError

MODEL = """
[[model]]
name = "small-cnn"
factory = "models.cnn:SmallCNN"
inputs = { input = "samples/cnn.npy" }
"""


def write(repo: Path, text: str, name: str = "onnx-parity.toml") -> Path:
    path = repo / name
    path.write_text(text, encoding="utf-8")
    return path


def failure(repo: Path, text: str) -> str:
    """The message load_settings raises for `text` as the repo's onnx-parity.toml."""
    write(repo, text)
    with pytest.raises(ConfigError) as raised:
        load_settings(repo)
    message = str(raised.value)
    assert "\n" not in message, "validation messages are one paragraph"
    return message


def model_with(*lines: str) -> str:
    return MODEL + "\n".join(lines) + "\n"


# --- happy path --------------------------------------------------------------------------------


def test_defaults_apply_when_only_required_keys_are_given(tmp_path: Path) -> None:
    write(tmp_path, MODEL)
    settings = load_settings(tmp_path)
    (model,) = settings.models
    assert settings.repo == tmp_path.resolve()
    assert settings.config_path == (tmp_path / "onnx-parity.toml").resolve()
    assert (model.name, model.factory) == ("small-cnn", "models.cnn:SmallCNN")
    assert model.inputs == {"input": tmp_path.resolve() / "samples" / "cnn.npy"}
    assert model.weights is None
    assert model.outputs == ()
    assert model.dynamic_axes == {}
    assert model.opset == checks.DEFAULT_OPSET
    assert model.exporters == ("dynamo", "torchscript")
    assert (model.atol, model.rtol) == (checks.DEFAULT_ATOL, checks.DEFAULT_RTOL)
    assert model.batch_sizes == checks.DEFAULT_BATCH_SIZES
    assert model.timeout_seconds == checks.DEFAULT_TIMEOUT_SECONDS
    assert model.memory_limit_mb is None
    assert model.allow_warnings == ()


def test_top_level_values_apply_to_every_model_and_models_override_them(tmp_path: Path) -> None:
    write(tmp_path, """
opset = 17
exporter = "torchscript"
atol = 1e-3
rtol = 0
batch-sizes = [2]
timeout-seconds = 30
memory-limit-mb = 2048

[[model]]
name = "plain"
factory = "m:f"
inputs = "samples/plain.npz"

[[model]]
name = "tuned"
factory = "pkg.mod:Outer.build"
weights = "weights/tuned.pth"
inputs = { a = "s/a.npy", b = "s/b.pb" }
outputs = ["y", "z"]
dynamic-axes = { a = { 0 = "batch", "2" = "time" }, y = { 0 = "batch" } }
opset = 20
exporter = ["torchscript", "dynamo"]
atol = 0.5
rtol = 1e-2
batch-sizes = [1, 3, 8]
timeout-seconds = 1.5
memory-limit-mb = 512

[[model.allow-warnings]]
match = "Converting a tensor to a Python boolean"
reason = "branch is constant for deployed inputs"
""")
    plain, tuned = load_settings(tmp_path).models
    root = tmp_path.resolve()
    assert (plain.opset, plain.exporters, plain.atol, plain.rtol) == (17, ("torchscript",), 1e-3, 0.0)
    assert (plain.batch_sizes, plain.timeout_seconds, plain.memory_limit_mb) == ((2,), 30.0, 2048)
    assert plain.inputs == root / "samples" / "plain.npz"
    assert (tuned.opset, tuned.exporters) == (20, ("torchscript", "dynamo"))
    assert (tuned.atol, tuned.rtol, tuned.batch_sizes) == (0.5, 1e-2, (1, 3, 8))
    assert (tuned.timeout_seconds, tuned.memory_limit_mb) == (1.5, 512)
    assert tuned.weights == root / "weights" / "tuned.pth"
    assert tuned.inputs == {"a": root / "s" / "a.npy", "b": root / "s" / "b.pb"}
    assert tuned.outputs == ("y", "z")
    assert tuned.dynamic_axes == {"a": {0: "batch", 2: "time"}, "y": {0: "batch"}}
    (allowed,) = tuned.allow_warnings
    assert allowed.match == "Converting a tensor to a Python boolean"
    assert allowed.reason == "branch is constant for deployed inputs"


@pytest.mark.parametrize(
    ("written", "resolved"),
    [('"auto"', ("dynamo", "torchscript")), ('"dynamo"', ("dynamo",)),
     ('"torchscript"', ("torchscript",)), ('["torchscript", "dynamo"]', ("torchscript", "dynamo"))],
)
def test_exporter_resolves_to_an_ordered_tuple(tmp_path: Path, written: str, resolved: tuple) -> None:
    write(tmp_path, model_with(f"exporter = {written}"))
    assert load_settings(tmp_path).models[0].exporters == resolved


def test_pyproject_table_is_used_when_there_is_no_onnx_parity_toml(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "x"\n\n[tool.onnx-parity]\natol = 0.1\n\n'
          '[[tool.onnx-parity.model]]\nname = "m"\nfactory = "a:b"\ninputs = "in.npz"\n',
          name="pyproject.toml")
    settings = load_settings(tmp_path)
    assert settings.config_path.name == "pyproject.toml"
    assert [(m.name, m.atol) for m in settings.models] == [("m", 0.1)]


def test_onnx_parity_toml_wins_over_pyproject(tmp_path: Path) -> None:
    write(tmp_path, '[tool.onnx-parity]\n[[tool.onnx-parity.model]]\nname = "from-pyproject"\n'
          'factory = "a:b"\ninputs = "in.npz"\n', name="pyproject.toml")
    write(tmp_path, MODEL)
    assert [m.name for m in load_settings(tmp_path).models] == ["small-cnn"]


def test_pyproject_errors_name_the_table(tmp_path: Path) -> None:
    write(tmp_path, '[tool.onnx-parity]\natoll = 1\n', name="pyproject.toml")
    with pytest.raises(ConfigError, match=r'^pyproject\.toml \[tool\.onnx-parity\]: key "atoll": '
                       r'unknown key; did you mean "atol"\?'):
        load_settings(tmp_path)


def test_config_option_relative_to_current_directory(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "ci").mkdir()
    write(tmp_path / "ci", MODEL, name="parity.toml")
    monkeypatch.chdir(tmp_path / "ci")
    settings = load_settings(tmp_path, Path("parity.toml"))
    assert settings.config_path == (tmp_path / "ci" / "parity.toml").resolve()
    # Paths in the config stay relative to the repository, not to the config file.
    assert settings.models[0].inputs == {"input": tmp_path.resolve() / "samples" / "cnn.npy"}


def test_config_option_absolute_and_errors_name_it_relative_to_repo(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    config = write(tmp_path / "ci", model_with("atoll = 1"), name="parity.toml")
    with pytest.raises(ConfigError, match=r'^ci/parity\.toml: model "small-cnn": key "atoll"'):
        load_settings(tmp_path, config.resolve())


def test_config_option_pointing_at_a_pyproject_reads_its_table(tmp_path: Path) -> None:
    config = write(tmp_path, '[tool.onnx-parity]\n[[tool.onnx-parity.model]]\nname = "p"\n'
                   'factory = "a:b"\ninputs = "in.npz"\n', name="pyproject.toml")
    write(tmp_path, MODEL)  # ignored: --config wins
    assert [m.name for m in load_settings(tmp_path, config).models] == ["p"]


def test_config_option_pyproject_without_table(tmp_path: Path) -> None:
    config = write(tmp_path, '[project]\nname = "x"\n', name="pyproject.toml")
    with pytest.raises(ConfigError, match=r"^pyproject\.toml: there is no \[tool\.onnx-parity\] "
                       r"table\. Add one"):
        load_settings(tmp_path, config)


def test_config_option_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path, tmp_path / "nope.toml")
    message = str(raised.value)
    assert message.startswith(f"--config {tmp_path / 'nope.toml'}: ")
    assert "does not exist" in message
    assert "relative to the current directory" in message


def test_no_configuration_explains_how_to_create_one(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "x"\n', name="pyproject.toml")
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    message = str(raised.value)
    assert "looked for onnx-parity.toml and for a [tool.onnx-parity] table in pyproject.toml" in message
    assert "Create onnx-parity.toml" in message
    # The example it shows is itself a valid configuration.
    example = message.split("for example:", 1)[1]
    write(tmp_path, example)
    assert [m.name for m in load_settings(tmp_path).models] == ["my-model"]


# --- file-level errors -----------------------------------------------------------------------------


def test_invalid_toml_reports_line_and_column(tmp_path: Path) -> None:
    message = failure(tmp_path, 'atol = 1e-5\nrtol = = 2\n')
    assert message.startswith("onnx-parity.toml: line 2, column 8: not valid TOML: Invalid value.")
    assert "Fix the syntax" in message


def test_invalid_utf8_is_reported(tmp_path: Path) -> None:
    (tmp_path / "onnx-parity.toml").write_bytes(b'atol = "\xff"\n')
    with pytest.raises(ConfigError, match=r"^onnx-parity\.toml: not UTF-8 text .*Save the file as UTF-8"):
        load_settings(tmp_path)


# --- keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start", "suggestion"),
    [
        ("atoll = 1\n" + MODEL, 'onnx-parity.toml: key "atoll"', '"atol"'),
        ("batch_sizes = [1]\n" + MODEL, 'onnx-parity.toml: key "batch_sizes"', '"batch-sizes"'),
        (MODEL.replace("[[model]]", "[[models]]"), 'onnx-parity.toml: key "models"', '"model"'),
        (model_with("atoll = 1"), 'onnx-parity.toml: model "small-cnn": key "atoll"', '"atol"'),
        (model_with("fatcory = 1"), 'onnx-parity.toml: model "small-cnn": key "fatcory"', '"factory"'),
        (model_with("[[model.allow-warnings]]", 'match = "x"', 'reasn = "y"'),
         'onnx-parity.toml: model "small-cnn": allow-warnings[0]: key "reasn"', '"reason"'),
    ],
)
def test_unknown_keys_suggest_the_nearest_valid_one(
    tmp_path: Path, text: str, start: str, suggestion: str
) -> None:
    message = failure(tmp_path, text)
    assert message.startswith(f"{start}: unknown key; did you mean {suggestion}?")
    assert "Valid keys here:" in message


def test_unknown_key_without_near_match_lists_valid_keys(tmp_path: Path) -> None:
    message = failure(tmp_path, "zzz = 1\n" + MODEL)
    assert "did you mean" not in message
    assert "Valid keys here: opset, exporter, atol" in message


def test_model_key_at_top_level_is_pointed_into_a_model(tmp_path: Path) -> None:
    message = failure(tmp_path, 'weights = "w.pt"\n' + MODEL)
    assert message.startswith('onnx-parity.toml: key "weights": this key belongs inside a [[model]]')


# --- types ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key", "expected", "got"),
    [
        ('atol = "small"', "atol", "a number", 'a string "small"'),
        ("atol = true", "atol", "a number", "a boolean true"),
        ("rtol = [1]", "rtol", "a number", "an array [1]"),
        ("batch-sizes = 4", "batch-sizes", "a non-empty list of positive integers", "an integer 4"),
        ("opset = 18.5", "opset", "an integer opset", "a float 18.5"),
        ("opset = true", "opset", "an integer opset", "a boolean true"),
        ('timeout-seconds = "10m"', "timeout-seconds", "a number of seconds", 'a string "10m"'),
        ("memory-limit-mb = 1.5", "memory-limit-mb", "a positive whole number", "a float 1.5"),
        ("memory-limit-mb = true", "memory-limit-mb", "a positive whole number", "a boolean"),
        ("exporter = 3", "exporter", 'exporter = "auto"', "an integer 3"),
        ("outputs = \"logits\"", "outputs", "a non-empty list of output names", "a string"),
        ("dynamic-axes = [0]", "dynamic-axes", "a table", "an array"),
        ("weights = 1", "weights", "a path to a state_dict file", "an integer 1"),
        ("allow-warnings = 1", "allow-warnings", "[[model.allow-warnings]]", "an integer 1"),
    ],
)
def test_wrong_types_name_the_expected_type(
    tmp_path: Path, line: str, key: str, expected: str, got: str
) -> None:
    message = failure(tmp_path, model_with(line))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "{key}": expected {expected}')
    assert f"; got {got}" in message


def test_wrong_type_at_top_level_has_no_model_in_the_place(tmp_path: Path) -> None:
    message = failure(tmp_path, 'atol = "small"\n' + MODEL)
    assert message.startswith('onnx-parity.toml: key "atol": expected a number, e.g. atol = 1e-5;')


# --- the model list ------------------------------------------------------------------------------


def test_missing_model_list(tmp_path: Path) -> None:
    message = failure(tmp_path, "atol = 1e-5\n")
    assert message.startswith("onnx-parity.toml: no models are declared. Add at least one [[model]]")


def test_empty_model_list(tmp_path: Path) -> None:
    message = failure(tmp_path, "model = []\n")
    assert message.startswith('onnx-parity.toml: key "model": expected a non-empty list of [[model]]')


def test_single_model_table_suggests_double_brackets(tmp_path: Path) -> None:
    message = failure(tmp_path, MODEL.replace("[[model]]", "[model]"))
    assert "Use [[model]] (double brackets)" in message


def test_model_entry_that_is_not_a_table(tmp_path: Path) -> None:
    message = failure(tmp_path, "model = [1]\n")
    assert message.startswith("onnx-parity.toml: model[0]: expected a table, got 1.")


def test_duplicate_model_names(tmp_path: Path) -> None:
    message = failure(tmp_path, MODEL + MODEL)
    assert message.startswith('onnx-parity.toml: model[1]: key "name": "small-cnn" is already used by model[0].')
    assert "rename one of them" in message


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "a b", "..", "café", "x" * 129, "a:b"])
def test_model_names_must_be_safe_file_names(tmp_path: Path, name: str) -> None:
    message = failure(tmp_path, MODEL.replace('"small-cnn"', f'"{name}"'))
    assert message.startswith('onnx-parity.toml: model[0]: key "name": ')
    assert "cannot be used as a file name (it becomes <name>.onnx)" in message


@pytest.mark.parametrize("name", ["a", "ResNet-50_v1.5", "0model", "_x", "x" * 128])
def test_safe_model_names_are_accepted(tmp_path: Path, name: str) -> None:
    write(tmp_path, MODEL.replace('"small-cnn"', f'"{name}"'))
    assert load_settings(tmp_path).models[0].name == name


@pytest.mark.parametrize(
    ("removed", "fix"),
    [("name", 'name = "my-model"'), ("factory", 'factory = "models.net:build_model" (or, for a folder that save_pretrained '
                'wrote, transformers = "checkpoints/tiny-llama")'),
     ("inputs", 'inputs = { input = "samples/input.npy" }')],
)
def test_missing_required_keys(tmp_path: Path, removed: str, fix: str) -> None:
    text = "\n".join(line for line in MODEL.splitlines() if not line.startswith(removed))
    message = failure(tmp_path, text)
    where = "model[0]" if removed == "name" else 'model "small-cnn"'
    assert message == f'onnx-parity.toml: {where}: key "{removed}": missing. Add it to this [[model]], e.g. {fix}.'


@pytest.mark.parametrize(
    "factory", ["models.cnn", "models.cnn:", ":SmallCNN", "a..b:f", "1mod:f", "m:f:g", "m:f-g", "m :f"]
)
def test_factory_must_be_module_colon_callable(tmp_path: Path, factory: str) -> None:
    message = failure(tmp_path, MODEL.replace("models.cnn:SmallCNN", factory))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "factory": "{factory}" is not '
                              'of the form "module:callable".')
    assert '"models.cnn:SmallCNN"' in message


def test_factory_accepts_dotted_module_and_attribute(tmp_path: Path) -> None:
    write(tmp_path, MODEL.replace("models.cnn:SmallCNN", "pkg.sub.mod:Outer.build"))
    assert load_settings(tmp_path).models[0].factory == "pkg.sub.mod:Outer.build"


# --- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [("[]", "expected a non-empty list of positive integers"),
     ("[0]", "[0] contains a size below 1"), ("[1, -4]", "[1, -4] contains a size below 1"),
     ("[1, 2.5]", "got a float 2.5"), ('[1, "2"]', 'got a string "2"'),
     ("[1, 4, 1]", "1 appears more than once; list each batch size once")],
)
def test_batch_sizes(tmp_path: Path, value: str, problem: str) -> None:
    message = failure(tmp_path, model_with(f"batch-sizes = {value}"))
    assert message.startswith('onnx-parity.toml: model "small-cnn": key "batch-sizes": ')
    assert problem in message


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [("atol", "-1e-5", "-1e-05 is negative. Use a tolerance >= 0"),
     ("rtol", "-0.1", "-0.1 is negative"),
     ("atol", "nan", "nan is not a finite number"),
     ("rtol", "inf", "inf is not a finite number"),
     ("atol", "-inf", "-inf is not a finite number"),
     ("rtol", '"1e-4"', 'expected a number, e.g. atol = 1e-5; got a string "1e-4"')],
)
def test_tolerances(tmp_path: Path, key: str, value: str, problem: str) -> None:
    message = failure(tmp_path, model_with(f"{key} = {value}"))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "{key}": {problem}')


@pytest.mark.parametrize(
    ("value", "problem"),
    [('"dynamoo"', 'unknown exporter "dynamoo"; did you mean "dynamo"?'),
     ('"torch_script"', 'unknown exporter "torch_script"; did you mean "torchscript"?'),
     ('["dynamo", "auto"]', 'unknown exporter "auto"'),
     ("[]", "expected exporter ="),
     ('["dynamo", "dynamo"]', "dynamo appears more than once; list each exporter once")],
)
def test_exporter_errors(tmp_path: Path, value: str, problem: str) -> None:
    message = failure(tmp_path, model_with(f"exporter = {value}"))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "exporter": {problem}')


@pytest.mark.parametrize("opset", [checks.MIN_OPSET - 1, checks.MAX_OPSET + 1, 0, -18])
def test_opset_outside_supported_range(tmp_path: Path, opset: int) -> None:
    message = failure(tmp_path, model_with(f"opset = {opset}"))
    assert message == (f'onnx-parity.toml: model "small-cnn": key "opset": opset {opset} is outside the '
                       f"supported range. Use an opset from {checks.MIN_OPSET} to {checks.MAX_OPSET} "
                       f"(the default is {checks.DEFAULT_OPSET}).")


@pytest.mark.parametrize("opset", [checks.MIN_OPSET, checks.MAX_OPSET])
def test_opset_bounds_are_inclusive(tmp_path: Path, opset: int) -> None:
    write(tmp_path, model_with(f"opset = {opset}"))
    assert load_settings(tmp_path).models[0].opset == opset


@pytest.mark.parametrize("value", ["0", "-1", "-0.5"])
def test_timeout_must_be_positive(tmp_path: Path, value: str) -> None:
    message = failure(tmp_path, model_with(f"timeout-seconds = {value}"))
    assert message.startswith('onnx-parity.toml: model "small-cnn": key "timeout-seconds": ')
    assert "is not a positive number of seconds. Use a value > 0" in message


@pytest.mark.parametrize("value", ["0", "-512"])
def test_memory_limit_must_be_positive(tmp_path: Path, value: str) -> None:
    message = failure(tmp_path, f"memory-limit-mb = {value}\n" + MODEL)
    assert message.startswith(f'onnx-parity.toml: key "memory-limit-mb": {value} is not positive. '
                              "Use a positive whole number of megabytes")


# --- inputs, outputs, dynamic axes -------------------------------------------------------------------


def test_empty_inputs_table(tmp_path: Path) -> None:
    message = failure(tmp_path, MODEL.replace('{ input = "samples/cnn.npy" }', "{}"))
    assert message.startswith('onnx-parity.toml: model "small-cnn": key "inputs": expected a table of '
                              "input name -> sample file")


def test_outputs_must_be_unique_non_empty_names(tmp_path: Path) -> None:
    assert "logits appears more than once" in failure(tmp_path, model_with('outputs = ["logits", "logits"]'))
    assert "an empty string is not an output name" in failure(tmp_path, model_with('outputs = [""]'))
    assert "expected a non-empty list of output names" in failure(tmp_path, model_with("outputs = []"))


DECLARED = 'outputs = ["logits"]'


@pytest.mark.parametrize(
    ("axes", "problem"),
    [('{ inptu = { 0 = "batch" } }', '"inptu" is neither an input nor an output of this model; '
                                      'did you mean "input"? Name one of "input", "logits".'),
     ('{ logit = { 0 = "batch" } }', '"logit" is neither an input nor an output of this model; '
                                      'did you mean "logits"? Name one of "input", "logits".')],
)
def test_dynamic_axes_names_are_checked_when_inputs_and_outputs_are_declared(
    tmp_path: Path, axes: str, problem: str
) -> None:
    message = failure(tmp_path, model_with(DECLARED, f"dynamic-axes = {axes}"))
    assert message == f'onnx-parity.toml: model "small-cnn": key "dynamic-axes": {problem}'


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [('"samples/all.npz"', DECLARED), ('{ input = "samples/cnn.npy" }', "")],
)
def test_dynamic_axes_names_are_accepted_when_they_cannot_be_checked(
    tmp_path: Path, inputs: str, outputs: str
) -> None:
    text = MODEL.replace('{ input = "samples/cnn.npy" }', inputs)
    write(tmp_path, text + outputs + '\ndynamic-axes = { anything = { 1 = "seq" } }\n')
    assert load_settings(tmp_path).models[0].dynamic_axes == {"anything": {1: "seq"}}


@pytest.mark.parametrize(
    ("axes", "place", "problem"),
    [('{ input = { "-1" = "batch" } }', "dynamic-axes.input", 'axis "-1" is not an axis index'),
     ('{ input = { x = "batch" } }', "dynamic-axes.input", 'axis "x" is not an axis index'),
     ('{ input = { 0 = "" } }', "dynamic-axes.input", "an empty string is not a dimension name"),
     ('{ input = { 0 = 1 } }', "dynamic-axes.input", "expected a dimension name; got an integer 1"),
     ("{ input = {} }", "dynamic-axes.input", "expected a table of axis index -> dimension name"),
     ('{ input = [0] }', "dynamic-axes.input", "expected a table of axis index"),
     ('{ "" = { 0 = "b" } }', "dynamic-axes", "an empty string is not an input or output name")],
)
def test_dynamic_axes_values(tmp_path: Path, axes: str, place: str, problem: str) -> None:
    message = failure(tmp_path, model_with(f"dynamic-axes = {axes}"))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "{place}": {problem}')


# --- allow-warnings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [('match = "x"', "reason", "missing. Add reason ="),
     ('reason = "y"', "match", "missing. Add match ="),
     ('match = "x"\nreason = ""', "reason", "an empty string is not non-empty text"),
     ('match = "  "\nreason = "y"', "match", "an empty string is not non-empty text"),
     ('match = "x"\nreason = 1', "reason", "expected non-empty text")],
)
def test_allow_warnings_need_match_and_reason(tmp_path: Path, body: str, key: str, problem: str) -> None:
    message = failure(tmp_path, model_with("[[model.allow-warnings]]", body))
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": allow-warnings[0]: key "{key}": {problem}')
    assert {"match": "text found in the warning", "reason": "the reason is the point"}[key] in message


# --- paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key", "problem"),
    [('weights = "/etc/cnn.pt"', "weights", 'path "/etc/cnn.pt" is absolute'),
     ('weights = "~/cnn.pt"', "weights", 'path "~/cnn.pt" is absolute'),
     ('weights = "C:/w/cnn.pt"', "weights", 'path "C:/w/cnn.pt" is absolute'),
     ('weights = "../cnn.pt"', "weights", 'path "../cnn.pt" leads outside the repository'),
     ('weights = "w/../../cnn.pt"', "weights", 'path "w/../../cnn.pt" leads outside the repository'),
     ('inputs = "../all.npz"', "inputs", 'path "../all.npz" leads outside the repository'),
     ('weights = ""', "weights", "the path is empty")],
)
def test_paths_outside_the_repository_are_refused(tmp_path: Path, line: str, key: str, problem: str) -> None:
    text = MODEL.replace('inputs = { input = "samples/cnn.npy" }', "") + line + "\n"
    if key != "inputs":
        text += 'inputs = "all.npz"\n'
    message = failure(tmp_path, text)
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "{key}": {problem}')
    assert "Paths are relative to the repository root" in message


def test_sample_path_outside_names_the_input_key(tmp_path: Path) -> None:
    message = failure(tmp_path, MODEL.replace("samples/cnn.npy", "../cnn.npy"))
    assert message.startswith('onnx-parity.toml: model "small-cnn": key "inputs.input": path "../cnn.npy" '
                              "leads outside the repository.")


def test_symlink_leading_outside_is_refused(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (repo / "samples").symlink_to(outside, target_is_directory=True)
    write(repo, MODEL)
    with pytest.raises(ConfigError) as raised:
        load_settings(repo)
    assert str(raised.value).startswith('onnx-parity.toml: model "small-cnn": key "inputs.input": path '
                                        '"samples/cnn.npy" goes through a symlink that points outside')


def test_symlink_inside_the_repository_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "samples").symlink_to(tmp_path / "real", target_is_directory=True)
    write(tmp_path, MODEL)
    assert load_settings(tmp_path).models[0].inputs == {"input": tmp_path.resolve() / "samples" / "cnn.npy"}


def test_backslashes_are_refused_with_forward_slash_fix(tmp_path: Path) -> None:
    message = failure(tmp_path, MODEL.replace("samples/cnn.npy", "samples\\\\cnn.npy"))
    assert 'path "samples\\cnn.npy" contains a backslash. Use forward slashes' in message


@pytest.mark.parametrize(
    ("line", "key", "problem"),
    [('weights = "weights/cnn.bin"', "weights", '"weights/cnn.bin" is not a state_dict file (expected .pt, .pth or .safetensors)'),
     ('weights = "weights/cnn.onnx"', "weights", '"weights/cnn.onnx" is not a state_dict file'),
     ('inputs = { input = "s/x.txt" }', "inputs.input", '"s/x.txt" is not a sample file we can read '
                                                        "(expected .npy, .npz, .pt or .pb)"),
     ('inputs = "s/x.npy"', "inputs", '"s/x.npy" is neither an .npz/.pt bundle nor a folder')],
)
def test_file_extensions_are_checked_per_key(tmp_path: Path, line: str, key: str, problem: str) -> None:
    text = MODEL.replace('inputs = { input = "samples/cnn.npy" }', line if key != "weights" else "")
    if key == "weights":
        text += line + '\ninputs = "all.npz"\n'
    message = failure(tmp_path, text)
    assert message.startswith(f'onnx-parity.toml: model "small-cnn": key "{key}": {problem}')


def test_bundle_may_be_a_folder_existing_or_not(tmp_path: Path) -> None:
    (tmp_path / "zoo" / "test_data.v1").mkdir(parents=True)
    write(tmp_path, MODEL.replace('{ input = "samples/cnn.npy" }', '"zoo/test_data.v1"')
          + MODEL.replace("small-cnn", "later").replace('{ input = "samples/cnn.npy" }', '"zoo/test_data_set_0"'))
    first, second = load_settings(tmp_path).models
    assert first.inputs == tmp_path.resolve() / "zoo" / "test_data.v1"
    assert second.inputs == tmp_path.resolve() / "zoo" / "test_data_set_0"


def test_resolve_inside_normalises_and_does_not_require_existence(tmp_path: Path) -> None:
    resolved = resolve_inside(tmp_path, "a/./b/../c.npy", "here")
    assert resolved == tmp_path.resolve() / "a" / "c.npy"
    assert resolved.is_absolute()
    assert not resolved.exists()


def test_resolve_inside_refuses_symlink_loops_cleanly(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    outcome: Path | str
    try:
        outcome = resolve_inside(tmp_path, "loop/x.npy", "where")
    except ConfigError as error:
        outcome = str(error)
    if isinstance(outcome, str):
        assert outcome.startswith('where: path "loop/x.npy"')
    else:  # non-strict resolve may stop at the loop; it must still stay inside
        assert outcome.is_relative_to(tmp_path.resolve())


def test_relative_repo_argument_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, MODEL)
    monkeypatch.chdir(tmp_path)
    settings = load_settings(Path("."))
    inputs = settings.models[0].inputs
    assert isinstance(inputs, dict)
    assert settings.repo == tmp_path.resolve()
    assert os.path.isabs(inputs["input"])


def test_control_characters_from_the_config_are_escaped_in_messages(tmp_path: Path) -> None:
    message = failure(tmp_path, model_with('"at\\nol" = 1'))
    assert message.startswith('onnx-parity.toml: model "small-cnn": key "at\\nol": unknown key')
