"""action.yml, the entrypoint and the documentation must agree.

- every input of action.yml is read by inputs.py (from INPUT_<NAME>, hyphens kept), with the
  same default, and documented (README.md or a page under docs/);
- every output of action.yml is written by action.py on a pull_request run and in the
  comment-from-report mode, and documented;
- every finding code of findings.CATALOGUE and every configuration key is documented.

"Documented" reads README.md and every page under docs/, the generated reference pages
included. That each code's text there is the catalogue's, each input's action.yml's and each
key's the schema's is tools/reference.py's check (tests/test_reference_docs.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml

from onnx_parity.findings import CATALOGUE
from onnx_parity.publishing.github.inputs import DEFAULTS, ActionInputs, environment_name
from test_action_flow import FAILING, FakeCheck, pr_env, run_step, write_report
from test_action_inputs import example

ROOT = Path(__file__).resolve().parent.parent
ACTION_YML = ROOT / "action.yml"
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def action() -> dict:
    if not ACTION_YML.exists():
        pytest.fail(f"{ACTION_YML} does not exist: the action's metadata (inputs, outputs, "
                    "runs) must be at the repository root.")
    return yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))


def readme() -> str:
    if not README.exists():
        pytest.fail(f"{README} does not exist: it is the front door (what the tool does, the "
                    "quick start, the example comment) and links into docs/.")
    return README.read_text(encoding="utf-8")


def documentation() -> str:
    """README.md and every page of docs/ (topic pages and the generated reference)."""
    pages = sorted(DOCS.rglob("*.md"))
    if not pages:
        pytest.fail(f"{DOCS} holds no pages: the manual lives there (mkdocs.yml lists them).")
    return "\n".join([readme(), *(page.read_text(encoding="utf-8") for page in pages)])


class RecordingEnviron(Mapping[str, str]):
    """An environment that remembers which variables were asked for."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:  # Mapping.get asks here too
        self.asked.add(key)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def test_every_input_of_action_yml_is_read_from_its_variable():
    inputs = action()["inputs"]
    environ = RecordingEnviron({})
    ActionInputs.from_environ(environ)
    missing = [name for name in inputs if environment_name(name) not in environ.asked]
    assert not missing, f"inputs.py never reads {missing} (variables INPUT_<NAME>, hyphens kept)"
    extra = sorted(set(DEFAULTS) - set(inputs))
    assert not extra, f"inputs.py reads {extra}, which action.yml does not declare"


def test_the_defaults_of_action_yml_are_the_ones_inputs_py_applies():
    for name, spec in action()["inputs"].items():
        declared = str(spec.get("default", ""))
        if name == "github-token":
            assert declared == "${{ github.token }}"
            continue
        assert declared == DEFAULTS[name], (
            f'input "{name}": action.yml says default "{declared}", inputs.py "{DEFAULTS[name]}"')


def test_every_input_has_a_description():
    undocumented = [name for name, spec in action()["inputs"].items() if not spec.get("description")]
    assert not undocumented


def test_every_output_of_action_yml_is_written_on_a_pull_request(tmp_path):
    from fake_github import FakeGitHub, Token
    from test_action_flow import TOKEN

    declared = set(action()["outputs"])
    (tmp_path / "pr").mkdir()
    (tmp_path / "report").mkdir()
    with FakeGitHub({TOKEN: Token.installation()}) as github:
        step = run_step(pr_env(tmp_path / "pr", github), FakeCheck(FAILING))
        assert set(step.outputs) == declared

        payload = example("workflow_run", "completed",
                          lambda p: p["workflow_run"]["pull_requests"])
        env = pr_env(tmp_path / "report", github, payload, event="workflow_run")
        env["INPUT_COMMENT-FROM-REPORT"] = write_report(env, FAILING)
        step = run_step(env, FakeCheck(FAILING))
        assert set(step.outputs) == declared
    assert step.outputs["comment-url"].startswith("https://github.test/")


def test_the_docs_document_every_input():
    text = documentation()
    missing = [name for name in action()["inputs"] if f"`{name}`" not in text]
    assert not missing, f"README.md and docs/ do not document the inputs {missing} (as `name`)"


def test_the_docs_document_every_output():
    text = documentation()
    missing = [name for name in action()["outputs"] if f"`{name}`" not in text]
    assert not missing, f"README.md and docs/ do not document the outputs {missing} (as `name`)"


def test_the_docs_document_every_finding_code():
    text = documentation()
    missing = [code for code in CATALOGUE if f"`{code}`" not in text]
    assert not missing, f"README.md and docs/ do not document the finding codes {missing}"


def test_the_docs_state_the_exit_codes_and_the_fork_story():
    text = documentation()
    for needle in ("pull_request_target", "comment-from-report", "workflow_run",
                   "run-fork-code-with-write-token", "::add-mask::"):
        assert needle in text, f"README.md and docs/ never mention {needle}"


def test_the_readme_tells_the_fork_story_in_short():
    """The preflight refusal and the comment's fork warning send the user to the README."""
    text = readme()
    assert "### Pull requests from forks" in text
    for needle in ("pull_request_target", "comment-from-report", "workflow_run",
                   "run-fork-code-with-write-token"):
        assert needle in text, f"README.md's fork section never mentions {needle}"


def test_the_docs_document_every_configuration_key():
    from onnx_parity.settings.keys.model_keys import ALLOW_WARNING_KEYS
    from onnx_parity.settings.loading import MODEL_KEYS, TOP_KEYS

    text = documentation()
    keys = [key for key in (*TOP_KEYS, *MODEL_KEYS, *ALLOW_WARNING_KEYS) if key != "model"]
    missing = [key for key in keys if f"`{key}`" not in text]
    assert "`[[model]]`" in text
    assert not missing, f"README.md and docs/ do not document the configuration keys {missing}"


def test_the_readme_shows_the_example_comment_byte_for_byte() -> None:
    """"The PR comment, as it looks" is tests/expected/seed-failures.full.md, as it says."""
    text = readme()
    start = text.index("(`tests/expected/seed-failures.full.md`,")
    start = text.index("rendered:\n\n", start) + len("rendered:\n\n")
    end = text.index("\n## ", start)
    expected = (ROOT / "tests" / "expected" / "seed-failures.full.md").read_text(encoding="utf-8")
    assert text[start:end] == expected
