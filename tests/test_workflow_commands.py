"""Workflow commands, the output file, the summary limit and the redactor."""

from __future__ import annotations

import io
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from onnx_parity.publishing.github.commands import (
    SUMMARY_LIMIT_BYTES,
    Annotation,
    WorkflowCommands,
    escape_data,
    escape_property,
    fit_markdown,
    output_entry,
    utf8_size,
    write_outputs,
    write_summary,
)
from onnx_parity.publishing.github.redaction import RedactingWriter, Redactor


def unescape(text: str) -> str:
    """The runner's reverse mapping (actions/runner ActionCommand.Unescape)."""
    for escaped, plain in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","),
                           ("%25", "%")):
        text = text.replace(escaped, plain)
    return text


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """Split `::name k=v,k=v::message` the way the runner does."""
    match = re.fullmatch(r"::([a-z-]+)(?: ([^:]*))?::(.*)", line)
    assert match, line
    props = {}
    for pair in (match.group(2) or "").split(","):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = unescape(value)
    return match.group(1), props, unescape(match.group(3))


def test_messages_escape_percent_and_line_breaks():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"


def test_properties_also_escape_colon_and_comma():
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


@given(message=st.text(), title=st.text(), file=st.text(min_size=1))
def test_any_annotation_survives_the_runners_parsing(message, title, file):
    line = Annotation("error", message, title=title, file=file, line=7).command()
    assert "\n" not in line
    assert "\r" not in line
    name, props, parsed = parse_command(line)
    assert (name, parsed) == ("error", message)
    assert props == {"file": file, "line": "7", "title": title}


def test_group_wraps_and_untrusted_text_cannot_issue_commands():
    out = io.StringIO()
    commands = WorkflowCommands(out)
    with commands.group("onnx-parity: a, b"):
        commands.untrusted_text("::endgroup::\n::error::fake\n")
    lines = out.getvalue().splitlines()
    assert lines[0] == "::group::onnx-parity: a, b"
    assert lines[-1] == "::endgroup::"
    stop = re.fullmatch(r"::stop-commands::(onnx-parity-[0-9a-f]{32})", lines[1])
    assert stop, lines[1]
    assert lines[2:4] == ["::endgroup::", "::error::fake"]  # printed while commands are off
    assert lines[4] == f"::{stop.group(1)}::"


def test_outputs_use_the_heredoc_form_with_a_fresh_delimiter(tmp_path):
    path = tmp_path / "output"
    path.write_text("earlier=1\n", encoding="utf-8")
    value = "line one\nghadelimiter_x\nfailed=true"
    write_outputs(path, {"failed-models": value, "passed": "false"})
    text = path.read_text(encoding="utf-8")
    assert text.startswith("earlier=1\n")
    assert parse_output_file(text) == {"earlier": "1", "failed-models": value, "passed": "false"}
    delimiters = re.findall(r"<<(\S+)", text)
    assert len(set(delimiters)) == 2


def parse_output_file(text: str) -> dict[str, str]:
    """Read GITHUB_OUTPUT as the runner does: `name=value` or `name<<DELIM ... DELIM`."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            values[name] = "\n".join(lines[index + 1:end])
            index = end + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
            index += 1
        else:
            index += 1
    return values


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_an_output_entry_round_trips_any_value(value):
    value = value.replace("\r", "")  # the runner splits on \n and keeps \r; keep it comparable
    assert parse_output_file(output_entry("v", value)) == {"v": value}


def renders(sizes: dict[int, int]):
    """A render function whose output at each detail level has a known size (in lines of 100)."""
    def render(detail: int) -> str:
        return "".join(f"detail {detail} line {i:05d}".ljust(99) + "\n" for i in range(sizes[detail]))
    return render


def test_summary_uses_the_most_detailed_rendering_that_fits(tmp_path):
    path = tmp_path / "summary.md"
    render = renders({2: 20_000, 1: 5_000, 0: 100})  # 2 MB, 500 kB, 10 kB
    fitted = write_summary(path, render, "POINTER")
    assert (fitted.detail, fitted.truncated) == (1, False)
    assert path.stat().st_size <= SUMMARY_LIMIT_BYTES
    assert "detail 1 line 04999" in path.read_text(encoding="utf-8")


def test_summary_counts_what_the_step_wrote_before(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("x" * 600_000, encoding="utf-8")
    fitted = write_summary(path, renders({2: 20_000, 1: 5_000, 0: 100}), "POINTER")
    assert fitted.detail == 0
    assert path.stat().st_size <= SUMMARY_LIMIT_BYTES


def test_a_summary_too_long_even_as_a_table_is_cut_with_a_pointer(tmp_path):
    path = tmp_path / "summary.md"
    fitted = write_summary(path, renders({2: 30_000, 1: 20_000, 0: 12_000}), "SEE report.md")
    text = path.read_text(encoding="utf-8")
    assert fitted.truncated
    assert text.rstrip().endswith("SEE report.md")
    assert SUMMARY_LIMIT_BYTES - 200 < path.stat().st_size <= SUMMARY_LIMIT_BYTES
    assert "detail 0 line 00000" in text


def test_a_cut_closes_open_fences_and_details():
    text = "<details><summary>log</summary>\n\n```\n" + "log line\n" * 1000 + "```\n</details>\n"
    fitted = fit_markdown(lambda _detail: text, 2_000, utf8_size, "POINTER")
    assert fitted.truncated
    assert utf8_size(fitted.text) <= 2_000
    assert fitted.text.count("```") % 2 == 0
    assert fitted.text.count("<details") == fitted.text.count("</details>")


def test_redactor_removes_the_token_and_its_encodings():
    import base64

    token = "ghs_abc/def+ghi"
    redact = Redactor([token, ""])
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    text = f"a {token} b ghs_abc%2Fdef%2Bghi c AUTHORIZATION: basic {header}"
    clean = redact(text)
    assert token not in clean
    assert "ghs_abc%2F" not in clean
    assert header.rstrip("=") not in clean
    assert clean.count("***") == 3


def test_redacting_writer_catches_a_token_split_across_writes():
    out = io.StringIO()
    writer = RedactingWriter(out, Redactor(["ghs_secret"]))
    print("value:", "ghs_", file=writer, end="")
    print("secret and more", file=writer)
    writer.write("tail ghs_secret")
    writer.flush()
    assert out.getvalue() == "value: *** and more\ntail ***"


def test_redacting_a_folder_rewrites_only_text_files(tmp_path: Path):
    (tmp_path / "report.json").write_text('{"log": "GITHUB_TOKEN=ghs_secret"}', encoding="utf-8")
    (tmp_path / "model.onnx").write_bytes(b"\x08ghs_secret")
    changed = Redactor(["ghs_secret"]).folder(tmp_path)
    assert changed == [tmp_path / "report.json"]
    assert "ghs_secret" not in (tmp_path / "report.json").read_text(encoding="utf-8")
