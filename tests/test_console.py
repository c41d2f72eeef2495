"""What a person sees while `onnx-parity check` runs.

On a terminal (a real pseudo-terminal here, read through the pyte terminal emulator, screen by
screen as a person would see it): a live view that ends in the same verdict table as plain mode.
Anywhere else (a pipe, NO_COLOR, TERM=dumb): today's progress lines, byte for byte.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

import pyte
import pytest

from fixture_repo.harness import copy_repo, run_cli, write_samples
from onnx_parity.report.console_text import verdict_table
from onnx_parity.report.serialization import run_from_json

COLUMNS, ROWS = 120, 40
# Two models that pass, so the view shows one finished while the other is still to run.
TWO_MODELS = """\
batch-sizes = [1, 3]

[[model]]
name = "first"
factory = "models.good:Linear"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "second"
factory = "models.good:Linear"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
"""
ELAPSED = re.compile(r"^\[ *\d+\.\ds\] ", re.MULTILINE)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("console") / "repo")
    write_samples(root)
    (root / "configs" / "two.toml").write_text(TWO_MODELS, encoding="utf-8")
    return root


@dataclass
class TerminalRun:
    code: int
    raw: bytes
    screens: list[str]  # the emulated screen after each chunk the program wrote

    @property
    def last(self) -> str:
        return self.screens[-1]


def check_command(out: Path) -> list[str]:
    return [sys.executable, "-m", "onnx_parity", "check", "--config", "configs/two.toml",
            "--jobs", "1", "--out", str(out)]


def run_in_terminal(command: list[str], cwd: Path, env: dict[str, str]) -> TerminalRun:
    """`command` with stdout and stderr on a pseudo-terminal of COLUMNS x ROWS."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=follower, stderr=follower)
    os.close(follower)
    screen = pyte.Screen(COLUMNS, ROWS)
    stream = pyte.ByteStream(screen)
    raw, screens = bytearray(), []
    while True:
        ready, _, _ = select.select([leader], [], [], 300)
        if not ready:
            process.kill()
            raise AssertionError(f"no output for 300 s; so far:\n{raw.decode(errors='replace')}")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the program closed the terminal
            chunk = b""
        if not chunk:
            break
        raw += chunk
        stream.feed(chunk)
        screens.append("\n".join(line.rstrip() for line in screen.display).rstrip())
    os.close(leader)
    return TerminalRun(process.wait(timeout=60), bytes(raw), screens)


def terminal_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    return env | {"TERM": "xterm-256color"} | extra


def expected_table(out: Path) -> str:
    import json

    run = run_from_json(json.loads((out / "report.json").read_text(encoding="utf-8")))
    return verdict_table(run)


def test_a_terminal_gets_a_live_view_that_ends_in_the_verdict_table(repo: Path,
                                                                     tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = run_in_terminal(check_command(out), repo, terminal_env())
    assert run.code == 0, run.raw.decode(errors="replace")
    table = expected_table(out)
    # What stays on the screen: the verdict table and the report line, as in plain mode.
    assert run.last == "\n" + table + f"report: {out}/report.md", run.last
    live = [screen for screen in run.screens if "onnx-parity check · configs/two.toml" in screen]
    assert live, run.screens[-5:]
    # Models done of total, each running model's step and elapsed time, finished verdicts.
    assert any("0 of 2 models done" in s and re.search(r"first\s+(load samples|build model|"
                                                       r"export|verify)\s+\d+\.\d s", s)
               for s in live), live
    assert "starting the workers (importing torch)" in live[0]
    assert any(re.search(r"second\s+waiting", s) for s in live)
    halfway = [s for s in live if "1 of 2 models done" in s]
    assert halfway
    assert re.search(r"PASS\s+first\s+max abs diff \d\.\d\de-\d\d \(atol 1e-05\)",
                     halfway[-1]), halfway
    assert any("2 of 2 models done" in s for s in live)
    assert b"\x1b[" in run.raw  # it was drawn, not printed line by line


def plain_lines(text: str) -> str:
    """The output with each progress line's elapsed time masked, line endings as written."""
    return ELAPSED.sub("[TIME] ", text.replace("\r\n", "\n"))


def expected_plain(out: Path) -> str:
    """Today's format: `[elapsed] model: step` per event (started, each step, finished), a
    blank line, the verdict table, the report line."""
    import json

    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    lines = []
    for model in report["models"]:
        steps = ["started", *(step["step"] for step in model["steps"]), "finished"]
        lines += [f"[TIME] {model['name']}: {step}\n" for step in steps]
    return "".join(lines) + "\n" + expected_table(out) + f"report: {out}/report.md\n"


def test_a_pipe_gets_the_plain_progress_lines_byte_for_byte(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("check", "--config", "configs/two.toml", "--jobs", "1", cwd=repo, out=out,
                   env={"TERM": "xterm-256color"})
    assert done.code == 0, done.stderr
    assert plain_lines(done.stdout) == expected_plain(out)
    assert "\x1b" not in done.stdout


@pytest.mark.parametrize("setting", [{"NO_COLOR": "1"}, {"TERM": "dumb"}],
                         ids=["NO_COLOR", "TERM=dumb"])
def test_a_terminal_that_asks_for_plain_text_gets_the_same_bytes_as_a_pipe(
        repo: Path, tmp_path: Path, setting: dict[str, str]) -> None:
    out = tmp_path / "out"
    run = run_in_terminal(check_command(out), repo, terminal_env(**setting))
    assert run.code == 0
    text = run.raw.decode("utf-8")
    assert plain_lines(text) == expected_plain(out)
    assert "\x1b" not in text


def test_help_never_imports_rich_or_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    """`--help` stays fast because nothing heavy is imported; its time is printed, not asserted
    (the machine is shared): README says about 0.1 s."""
    probe = ("import sys, runpy\n"
             "sys.argv = ['onnx-parity', 'check', '--help']\n"
             "try:\n"
             "    runpy.run_module('onnx_parity', run_name='__main__')\n"
             "except SystemExit:\n"
             "    pass\n"
             "heavy = sorted(m for m in ('rich', 'torch', 'numpy', 'onnx', 'tomlkit') "
             "if m in sys.modules)\n"
             "print('HEAVY', heavy, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert "HEAVY []" in done.stderr, done.stderr
    timed = run_cli("--help", cwd=tmp_path)
    assert timed.code == 0
    with capsys.disabled():
        print(f"\n`onnx-parity --help`: {timed.seconds:.2f} s wall time")
