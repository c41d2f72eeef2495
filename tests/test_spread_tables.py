"""An inline table spread over several lines: load_settings says so, names the file and line,
and shows that very table in the form that loads (settings/inline_tables.py).

Each case loads a real file in a temporary repository; where the message shows a sub-table,
the test writes it where the message says, in place of the spread lines, and loads the result.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onnx_parity.settings import Settings, load_settings
from onnx_parity.settings.values import ConfigError

STEP = """\
[[model]]
name = "llama-step"
factory = "models.lm:build"
inputs = { input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy",  # the prompt
           "past_key_values.0.key" = "samples/k0.npy", "past_key_values.0.value" = "samples/v0.npy" }
dynamic-axes = { input_ids = { 0 = "batch" }, attention_mask = { 0 = "batch", 1 = "past + 1" }, "past_key_values.0.key" = { 0 = "batch", 2 = "past" }, "past_key_values.0.value" = { 0 = "batch", 2 = "past" } }
"""
STEP_INPUTS = {"input_ids": "samples/ids.npy", "attention_mask": "samples/mask.npy",
               "past_key_values.0.key": "samples/k0.npy",
               "past_key_values.0.value": "samples/v0.npy"}
AXES_OVER_LINES = """\
[[model]]
name = "llama"
factory = "models.lm:build"
inputs = { input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy" }
dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" },   # a comment inside
                 attention_mask = {
                   0 = "batch", 1 = "sequence" },
               }
"""
MODEL = '[[model]]\nname = "m"\nfactory = "models.net:build"\ninputs = { x = "samples/x.npy" }\n'


def load(repo: Path, text: str, name: str = "onnx-parity.toml") -> Settings:
    (repo / name).write_text(text, encoding="utf-8")
    return load_settings(repo)


def refused(repo: Path, text: str, name: str = "onnx-parity.toml") -> str:
    with pytest.raises(ConfigError) as raised:
        load(repo, text, name)
    return str(raised.value)


def paths(repo: Path, inputs: dict[str, str]) -> dict[str, Path]:
    """Each input's file as loading resolves it, inside the repository."""
    return {name: repo.resolve() / raw for name, raw in inputs.items()}


def shown_form(message: str) -> str:
    """The table the message shows: the text after its blank line."""
    assert message.count("\n\n") == 1, message
    return message.split("\n\n")[1].strip("\n") + "\n"


def without_lines(text: str, first: int, last: int) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:first - 1] + lines[last:])


def test_a_spread_inputs_table_is_named_with_its_lines_and_shown_as_a_sub_table(
        tmp_path: Path) -> None:
    message = refused(tmp_path, STEP)
    assert message.startswith(
        "onnx-parity.toml: line 4: the inline table of `inputs` spans lines 4-5, and TOML "
        "allows an inline table `{ ... }` on one line only (tomllib says: Invalid initial "
        "character for a key part). Write it on one line, or as a sub-table, one key per line, "
        "after the other keys of this [[model]] entry"), message
    assert shown_form(message) == (
        '[model.inputs]\ninput_ids = "samples/ids.npy"\nattention_mask = "samples/mask.npy"\n'
        '"past_key_values.0.key" = "samples/k0.npy"\n'
        '"past_key_values.0.value" = "samples/v0.npy"\n')

    fixed = load(tmp_path, without_lines(STEP, 4, 5) + "\n" + shown_form(message))
    assert fixed.models[0].inputs == paths(tmp_path, STEP_INPUTS)
    assert fixed.models[0].dynamic_axes["attention_mask"] == {0: "batch", 1: "past + 1"}


def test_nested_tables_and_comments_inside_become_one_line_per_key(tmp_path: Path) -> None:
    message = refused(tmp_path, AXES_OVER_LINES)
    assert message.startswith("onnx-parity.toml: line 5: the inline table of `dynamic-axes` "
                              "spans lines 5-8"), message
    assert shown_form(message) == ('[model.dynamic-axes]\ninput_ids = { 0 = "batch", 1 = '
                                   '"sequence" }\nattention_mask = { 0 = "batch", 1 = '
                                   '"sequence" }\n')
    fixed = load(tmp_path, without_lines(AXES_OVER_LINES, 5, 8) + "\n" + shown_form(message))
    assert fixed.models[0].dynamic_axes == {"input_ids": {0: "batch", 1: "sequence"},
                                            "attention_mask": {0: "batch", 1: "sequence"}}


def test_in_pyproject_the_sub_table_keeps_the_tool_path(tmp_path: Path) -> None:
    text = ('[project]\nname = "demo"\n\n[[tool.onnx-parity.model]]\nname = "m"\n'
            'factory = "models.net:build"\ninputs = {\n  x = "samples/x.npy",\n'
            '  y = "samples/y.npy" }\n')
    message = refused(tmp_path, text, "pyproject.toml")
    assert message.startswith("pyproject.toml: line 7: the inline table of `inputs` spans "
                              "lines 7-9"), message
    assert "after the other keys of this [[tool.onnx-parity.model]] entry" in message
    form = shown_form(message)
    assert form.startswith("[tool.onnx-parity.model.inputs]\n")
    fixed = load(tmp_path, without_lines(text, 7, 9) + form, "pyproject.toml")
    assert fixed.models[0].inputs == paths(tmp_path, {"x": "samples/x.npy", "y": "samples/y.npy"})


def test_a_spread_top_level_table_goes_before_the_first_model(tmp_path: Path) -> None:
    text = 'env = { YOLO_OFFLINE = "1",\n        MPLCONFIGDIR = ".cache/matplotlib" }\n\n' + MODEL
    message = refused(tmp_path, text)
    assert message.startswith("onnx-parity.toml: line 1: the inline table of `env` spans "
                              "lines 1-2"), message
    assert "after the other top-level keys, before the first [[model]]" in message
    form = shown_form(message)
    assert form == '[env]\nYOLO_OFFLINE = "1"\nMPLCONFIGDIR = ".cache/matplotlib"\n'
    assert load(tmp_path, form + "\n" + MODEL).env == {"YOLO_OFFLINE": "1",
                                                       "MPLCONFIGDIR": ".cache/matplotlib"}


def test_a_spread_table_inside_an_array_is_shown_on_one_line(tmp_path: Path) -> None:
    text = (MODEL + 'allow-warnings = [\n  { match = "Converting a tensor",\n'
            '    reason = "constant # here, not a comment" },\n]\n')
    message = refused(tmp_path, text)
    assert message.startswith("onnx-parity.toml: line 6: an inline table in an array spans "
                              "lines 6-7"), message
    one_line = shown_form(message).strip()
    assert one_line == '{ match = "Converting a tensor", reason = "constant # here, not a comment" }'
    fixed = load(tmp_path, MODEL + f"allow-warnings = [{one_line}]\n")
    assert fixed.models[0].allow_warnings[0].reason == "constant # here, not a comment"


@pytest.mark.parametrize("text", [
    MODEL + "atol = = 1\n",  # no table at all
    MODEL + 'dynamic-axes = { x = = { 0 = "batch" },\n  y = { 0 = "batch" } }\n',  # a mistake
    MODEL + 'reason = "{ not a table"\natol = = 1\n',  # a brace inside a string
    MODEL + 'env = { A = "1",\n[[model]]\n}\n',  # no key = value inside the braces
])
def test_other_syntax_errors_keep_tomllibs_message(tmp_path: Path, text: str) -> None:
    message = refused(tmp_path, text)
    assert re.match(r"onnx-parity\.toml: line \d+, column \d+: not valid TOML: ", message), message
    assert "spans" not in message
