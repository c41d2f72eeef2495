"""The reference pages are generated from the code (tools/reference.py), and checked against it.

A key declared once in settings/schema.py is loaded, validated, listed in the valid-keys
message and documented with no other edit: shown on a copy of the package with one more
declaration, run in its own interpreter. A key or code without its text is refused, and a
page that no longer matches the code fails the check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "reference.py"
PACKAGE = ROOT / "entrypoint" / "onnx_parity"
# One more key, declared the one way the schema asks for: a field of ModelSpec.
DECLARATION = '''
    warm_up_seconds: float = setting(
        "warm-up-seconds", kind="number > 0", check=plain(timeout_value), default=1.0,
        example="warm-up-seconds = 5", doc={doc!r})
'''
ANCHOR = "    # input -> axis -> the sizes to run that axis at.\n"


def run(args: list[str], package_parent: Path | None = None,
        cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if package_parent is not None:
        env["PYTHONPATH"] = str(package_parent)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


def package_with_key(tmp_path: Path, doc: str) -> Path:
    """A copy of the package whose schema declares one more key; the folder to put on the path."""
    parent = tmp_path / "pkg"
    shutil.copytree(PACKAGE, parent / "onnx_parity",
                    ignore=shutil.ignore_patterns("__pycache__"))
    schema = parent / "onnx_parity" / "settings" / "schema.py"
    text = schema.read_text(encoding="utf-8")
    assert ANCHOR in text
    schema.write_text(text.replace(ANCHOR, DECLARATION.format(doc=doc) + ANCHOR),
                      encoding="utf-8")
    return parent


def docs_root(tmp_path: Path) -> Path:
    """A repository root with the real README, action.yml and docs/, to generate into."""
    root = tmp_path / "root"
    root.mkdir()
    for name in ("README.md", "action.yml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "docs", root / "docs")
    return root


def test_every_generated_page_matches_the_code() -> None:
    done = run([str(TOOL), "--check"])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_key_declared_once_is_loaded_validated_listed_and_documented(tmp_path: Path) -> None:
    parent = package_with_key(tmp_path, "Seconds of warm-up before the model is timed.")
    repo = tmp_path / "repo"
    repo.mkdir()
    probe = textwrap.dedent('''
        import sys
        from pathlib import Path
        import onnx_parity
        from onnx_parity.settings.loading import load_settings
        from onnx_parity.settings.values import ConfigError
        assert Path(onnx_parity.__file__).is_relative_to(sys.argv[2]), onnx_parity.__file__
        repo = Path(sys.argv[1])
        model = '[[model]]\\nname = "m"\\nfactory = "models.net:build"\\ninputs = "s.npz"\\n'
        def load(text):
            (repo / "onnx-parity.toml").write_text(text, encoding="utf-8")
            return load_settings(repo)
        print("inherited", load("warm-up-seconds = 5\\n" + model).models[0].warm_up_seconds)
        print("own", load(model + "warm-up-seconds = 7\\n").models[0].warm_up_seconds)
        print("default", load(model).models[0].warm_up_seconds)
        for bad in ("warm-up-seconds = -1\\n" + model, model + "warm-up-secs = 1\\n"):
            try:
                load(bad)
            except ConfigError as error:
                print("error", error)
    ''')
    done = run(["-c", probe, str(repo), str(parent)], package_parent=parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["inherited 5.0", "own 7.0", "default 1.0"]
    assert lines[3].startswith('error onnx-parity.toml: key "warm-up-seconds": -1 is not a '
                               "positive number of seconds.")
    assert lines[4].startswith('error onnx-parity.toml: model "m": key "warm-up-secs": unknown '
                               'key; did you mean "warm-up-seconds"?')
    assert "drift-warning-ratio, warm-up-seconds, axis-sizes, generate, eval-tokens." in lines[4]

    # The committed pages no longer match the code: the check names the page and the command.
    stale = run([str(TOOL), "--check"], package_parent=parent)
    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        "docs/reference/configuration.md: out of date with the code. Run `python "
        "tools/reference.py` and commit the result."]

    # Regenerated, the page documents the key with its type, default and meaning.
    root = docs_root(tmp_path)
    written = run([str(TOOL), "--root", str(root)], package_parent=parent)
    assert written.returncode == 0, written.stderr
    assert written.stdout == "wrote docs/reference/configuration.md\n"
    page = (root / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert ('| <a id="warm-up-seconds"></a>`warm-up-seconds` | number > 0 | `1` | top level and '
            "`[[model]]` | yes | Seconds of warm-up before the model is timed. |") in page
    assert "drift-warning-ratio, warm-up-seconds, axis-sizes, generate, eval-tokens." in page
    assert "\nwarm-up-seconds = 5\n" in page


@pytest.mark.parametrize("doc", ["", "   "])
def test_a_key_without_its_doc_text_is_refused_by_name(tmp_path: Path, doc: str) -> None:
    parent = package_with_key(tmp_path, doc)
    done = run([str(TOOL), "--check"], package_parent=parent)
    assert done.returncode == 2
    assert done.stderr == ('tools/reference.py: entrypoint/onnx_parity/settings/schema.py: key '
                           '"warm-up-seconds" has no doc text: write what it means in its '
                           "setting(..., doc=...).\n")


def package_with_code(tmp_path: Path, fix: str) -> Path:
    """A copy of the package with one more finding code in the vocabulary and the catalogue."""
    parent = tmp_path / "pkg"
    shutil.copytree(PACKAGE, parent / "onnx_parity",
                    ignore=shutil.ignore_patterns("__pycache__"))
    findings = parent / "onnx_parity" / "finding_catalogue.py"  # findings.py owns it
    codes = parent / "onnx_parity" / "finding_codes.py"  # the vocabulary, findings.py owns it
    text, vocabulary_text = (findings.read_text(encoding="utf-8"),
                             codes.read_text(encoding="utf-8"))
    vocabulary, catalogue_end = '    "positional-binding", "drift-regression",\n', "\n}\n"
    assert vocabulary in vocabulary_text
    assert catalogue_end in text
    codes.write_text(vocabulary_text.replace(vocabulary, vocabulary + '    "demo-code",\n', 1),
                     encoding="utf-8")
    entry = f'    "demo-code": CodeInfo(Severity.NOTE, "a code added for this test", {fix!r}),'
    findings.write_text(text.replace(catalogue_end, f"\n{entry}\n}}\n", 1), encoding="utf-8")
    return parent


def test_a_code_without_its_fix_is_refused_and_a_new_code_makes_the_pages_stale(
        tmp_path: Path) -> None:
    refused = run([str(TOOL), "--check"], package_parent=package_with_code(tmp_path / "a", ""))
    assert refused.returncode == 2
    assert refused.stderr == ('tools/reference.py: entrypoint/onnx_parity/finding_catalogue.py: '
                              'code "demo-code" has no fix: say what the user does about it in its '
                              "CodeInfo.\n")

    parent = package_with_code(tmp_path / "b", "Nothing to do: it only shows the check works.")
    stale = run([str(TOOL), "--check"], package_parent=parent)
    assert stale.returncode == 1
    assert [line.split(":")[0] for line in stale.stderr.splitlines()] == [
        "docs/reference/findings.md", "README.md"]
    root = docs_root(tmp_path)
    assert run([str(TOOL), "--root", str(root)], package_parent=parent).returncode == 0
    page = (root / "docs" / "reference" / "findings.md").read_text(encoding="utf-8")
    assert "## demo-code\n\n**Severity:** note\n\n**Meaning:** a code added for this test." in page
    assert ("- [`demo-code`](docs/reference/findings.md#demo-code) (note): a code added for "
            "this test.\n") in (root / "README.md").read_text(encoding="utf-8")
