"""The docs build as a site, strictly, and the README stays the short front door.

`mkdocs build --strict` with mkdocs.yml's validation turns a link to a missing page or a missing
anchor into an error; the second test plants each kind of break in a copy of docs/ and shows the
build fails, so the first test can fail too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 400
# The quick start, byte for byte: what a new user runs, and what .ci/run runs (install, tests).
INSTALL_AND_CHECK = ("python3 -m venv .venv && .venv/bin/pip install -c requirements.lock . && "
                     ".venv/bin/onnx-parity check --repo examples/seed-failures")
INSTALL_AND_TEST = ("python3 -m venv .venv && .venv/bin/pip install -c requirements.lock -e "
                    "'.[test]' && .venv/bin/python -m pytest")
README_LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # Material prints a banner about MkDocs 2.0 on every build; it is not a warning of ours.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(root / "mkdocs.yml"), "--site-dir", str(site)],
        capture_output=True, text=True, cwd=root, env=env, timeout=300, check=False)


def test_the_docs_build_strictly_without_a_warning(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "benchmarks" / "index.html").exists()


@pytest.mark.parametrize(("link", "said"), [
    ("[a page that is not there](no-such-page.md)", "no-such-page.md"),
    ("[an anchor that is not there](configuration.md#no-such-heading)", "#no-such-heading"),
    ("[an anchor of this page that is not there](#nowhere)", "#nowhere"),
])
def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path, link: str, said: str) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    page = copy / "docs" / "findings.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\n{link}\n", encoding="utf-8")
    done = build(copy, tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert said in output, output
    assert "strict mode" in output, output


def test_the_readme_is_short_and_keeps_the_two_quick_start_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    commands = re.search(r"## Quick start\n.*?```bash\n(.*?)```", text, re.S)
    assert commands, "README.md has no bash block under ## Quick start"
    lines = [line for line in commands.group(1).splitlines() if line and not line.startswith("#")]
    assert lines == [INSTALL_AND_CHECK, INSTALL_AND_TEST]


def test_ci_runs_what_the_readme_tells_a_contributor() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "-m pip install --quiet -c requirements.lock -e '.[test]'" in script
    assert ".venv/bin/python -m pytest" in script


def test_every_link_of_the_readme_into_docs_names_a_page() -> None:
    targets = README_LINK.findall(README.read_text(encoding="utf-8"))
    assert targets, "README.md links nowhere into docs/"
    missing = sorted({target for target in targets if not (ROOT / target).exists()})
    assert not missing, f"README.md links to {missing}, which do not exist"
