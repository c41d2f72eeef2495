"""What the action reads: its inputs (INPUT_* with hyphens) and the event (real payloads).

Event payloads are GitHub's own examples from the npm package @octokit/webhooks-examples,
fetched with `npm pack` into .ci-cache/ at the repository root on first use. Without npm or
the registry these tests FAIL (they do not skip): the payload shapes are what they check.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from onnx_parity.publishing.github.event import EventContext, EventError
from onnx_parity.publishing.github.inputs import (
    DEFAULTS,
    ActionInputs,
    FailOn,
    InputError,
    environment_name,
)

WEBHOOK_EXAMPLES = "@octokit/webhooks-examples@7.6.1"
CACHE = Path(__file__).resolve().parent.parent / ".ci-cache" / "webhooks-examples-7.6.1"


# -- the real payloads ----------------------------------------------------------------------


def webhook_examples() -> list[dict]:
    """api.github.com/index.json of the pinned package: [{name, actions, examples}, ...]."""
    index = CACHE / "package" / "api.github.com" / "index.json"
    if not index.exists():
        _fetch_examples()
    return json.loads(index.read_text(encoding="utf-8"))


def _fetch_examples() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is not installed; it is needed to fetch {WEBHOOK_EXAMPLES} (real "
                    "GitHub event payloads). Install Node.js/npm and run the tests again.")
    CACHE.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([npm, "pack", WEBHOOK_EXAMPLES, "--silent"], cwd=CACHE, text=True,
                            capture_output=True, timeout=300, check=False)
    if result.returncode != 0:
        pytest.fail(f"`npm pack {WEBHOOK_EXAMPLES}` failed (exit {result.returncode}); the "
                    f"npm registry must be reachable for these tests.\n{result.stderr[-2000:]}")
    archive = CACHE / result.stdout.strip().splitlines()[-1]
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")


def example(event: str, action: str | None = None, where=lambda _payload: True) -> dict:
    """A deep copy of the first example of `event` (with `action`) that satisfies `where`."""
    for entry in webhook_examples():
        if entry["name"] != event:
            continue
        for payload in entry["examples"]:
            if (action is None or payload.get("action") == action) and where(payload):
                return copy.deepcopy(payload)
    raise AssertionError(f"{WEBHOOK_EXAMPLES} has no {event}/{action} example")


def fork_variant(payload: dict, fork: str = "mallory/Hello-World") -> dict:
    """The same PR opened from a fork: only head.repo changes, as on GitHub."""
    forked = copy.deepcopy(payload)
    head_repo = forked["pull_request"]["head"]["repo"]
    owner = fork.split("/")[0]
    head_repo.update(full_name=fork, name=fork.split("/")[1], fork=True,
                     owner=dict(head_repo["owner"], login=owner))
    forked["pull_request"]["head"]["label"] = f"{owner}:changes"
    return forked


def runner_environment(tmp_path: Path, event_name: str, payload: dict | None,
                       **inputs: str) -> dict[str, str]:
    """The variables a Docker action sees: GITHUB_* and INPUT_<NAME> with hyphens kept."""
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(payload or {}), encoding="utf-8")
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    repository = (payload or {}).get("repository", {}).get("full_name", "Codertocat/Hello-World")
    env = {
        "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": repository, "GITHUB_SHA": "f" * 40,
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": "https://api.github.com",
        "GITHUB_RUN_ID": "4242", "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    env.update({environment_name(name.replace("_", "-")): value for name, value in inputs.items()})
    return env


# -- inputs ---------------------------------------------------------------------------------


def test_input_names_keep_their_hyphens():
    assert environment_name("github-token") == "INPUT_GITHUB-TOKEN"
    assert environment_name("run-fork-code-with-write-token") == "INPUT_RUN-FORK-CODE-WITH-WRITE-TOKEN"


def test_defaults_apply_when_the_variables_are_unset():
    inputs = ActionInputs.from_environ({})
    assert inputs == ActionInputs(
        config=None, working_directory=".", github_token="", comment=True,
        fail_on=FailOn.ERROR, output_dir="onnx-parity-out", requirements=None,
        comment_from_report=None, run_fork_code_with_write_token=False)


def test_every_input_is_read_from_its_own_variable():
    env = {
        "INPUT_CONFIG": "ci/parity.toml", "INPUT_WORKING-DIRECTORY": "models",
        "INPUT_GITHUB-TOKEN": "ghs_secret", "INPUT_COMMENT": "false", "INPUT_FAIL-ON": "warning",
        "INPUT_OUTPUT-DIR": "out/parity", "INPUT_REQUIREMENTS": "requirements-models.txt",
        "INPUT_COMMENT-FROM-REPORT": "artifact/report.json",
        "INPUT_RUN-FORK-CODE-WITH-WRITE-TOKEN": "true",
    }
    inputs = ActionInputs.from_environ(env)
    assert (inputs.config, inputs.working_directory, inputs.github_token) == (
        "ci/parity.toml", "models", "ghs_secret")
    assert (inputs.comment, inputs.fail_on, inputs.output_dir) == (False, FailOn.WARNING,
                                                                   "out/parity")
    assert (inputs.requirements, inputs.comment_from_report) == ("requirements-models.txt",
                                                                 "artifact/report.json")
    assert inputs.run_fork_code_with_write_token is True


def test_the_token_never_appears_in_the_inputs_repr():
    inputs = ActionInputs.from_environ({"INPUT_GITHUB-TOKEN": "ghs_do_not_print"})
    assert "ghs_do_not_print" not in repr(inputs)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("True", True),
                                             ("FALSE", False), (" true ", True)])
def test_booleans_accept_true_and_false_in_any_case(value, expected):
    assert ActionInputs.from_environ({"INPUT_COMMENT": value}).comment is expected


@pytest.mark.parametrize("name", ["comment", "run-fork-code-with-write-token"])
@pytest.mark.parametrize("value", ["yes", "1", "on", "no", "flase"])
def test_a_boolean_typo_is_an_error_naming_the_input(name, value):
    with pytest.raises(InputError) as raised:
        ActionInputs.from_environ({environment_name(name): value})
    assert f'input "{name}" is "{value}"' in str(raised.value)
    assert '"true"' in str(raised.value)
    assert '"false"' in str(raised.value)


def test_fail_on_accepts_only_its_three_values():
    for value in ("error", "warning", "never", "Warning"):
        assert ActionInputs.from_environ({"INPUT_FAIL-ON": value}).fail_on.value == value.lower()
    with pytest.raises(InputError, match='input "fail-on" is "errors"; it must be one of'):
        ActionInputs.from_environ({"INPUT_FAIL-ON": "errors"})


@pytest.mark.parametrize("name", ["working-directory", "output-dir", "requirements",
                                  "comment-from-report"])
def test_absolute_paths_are_refused(name):
    with pytest.raises(InputError, match=f'input "{name}" is "/etc".*relative to the repository'):
        ActionInputs.from_environ({environment_name(name): "/etc"})


def test_defaults_cover_exactly_the_dataclass_fields():
    fields = set(ActionInputs.__dataclass_fields__)
    assert {name.replace("-", "_") for name in DEFAULTS} == fields


# -- the event ------------------------------------------------------------------------------


def test_pull_request_opened_gives_number_head_and_same_repository(tmp_path):
    payload = example("pull_request", "opened")
    event = EventContext.from_environ(runner_environment(tmp_path, "pull_request", payload))
    pr = event.pull_request
    assert pr is not None
    assert pr.number == payload["number"]
    assert pr.head_sha == payload["pull_request"]["head"]["sha"]
    assert not pr.is_fork
    assert event.checked_sha == pr.head_sha
    assert event.source_base("models") == (
        f"https://github.com/{payload['repository']['full_name']}/blob/{pr.head_sha}/models")
    assert event.run_url == f"https://github.com/{payload['repository']['full_name']}/actions/runs/4242"


def test_synchronize_gives_the_new_head(tmp_path):
    payload = example("pull_request", "synchronize")
    event = EventContext.from_environ(runner_environment(tmp_path, "pull_request", payload))
    assert event.pull_request is not None
    assert event.pull_request.head_sha == payload["pull_request"]["head"]["sha"]


def test_a_fork_head_is_a_fork(tmp_path):
    payload = fork_variant(example("pull_request", "opened"))
    event = EventContext.from_environ(runner_environment(tmp_path, "pull_request_target", payload))
    assert event.pull_request is not None
    assert event.pull_request.is_fork
    assert event.pull_request.head_repository == "mallory/Hello-World"


def test_a_deleted_fork_counts_as_a_fork(tmp_path):
    payload = example("pull_request", "opened")
    payload["pull_request"]["head"]["repo"] = None
    event = EventContext.from_environ(runner_environment(tmp_path, "pull_request", payload))
    assert event.pull_request is not None
    assert event.pull_request.is_fork
    assert event.pull_request.head_repository is None


def test_push_has_no_pull_request_and_links_at_github_sha(tmp_path):
    payload = example("push")
    event = EventContext.from_environ(runner_environment(tmp_path, "push", payload))
    assert event.pull_request is None
    assert event.workflow_run is None
    assert event.source_base(".").endswith("/blob/" + "f" * 40)


def test_workflow_run_completed_gives_head_sha_and_listed_prs(tmp_path):
    listed = example("workflow_run", "completed", lambda p: p["workflow_run"]["pull_requests"])
    event = EventContext.from_environ(runner_environment(tmp_path, "workflow_run", listed))
    assert event.workflow_run is not None
    assert event.workflow_run.pull_request_numbers == tuple(
        pr["number"] for pr in listed["workflow_run"]["pull_requests"])
    assert event.workflow_run.head_sha == listed["workflow_run"]["head_sha"]
    empty = example("workflow_run", "completed", lambda p: not p["workflow_run"]["pull_requests"])
    event = EventContext.from_environ(runner_environment(tmp_path, "workflow_run", empty))
    assert event.workflow_run is not None
    assert event.workflow_run.pull_request_numbers == ()


def test_an_unreadable_payload_is_an_event_error(tmp_path):
    env = runner_environment(tmp_path, "pull_request", None)
    Path(env["GITHUB_EVENT_PATH"]).write_text("{not json", encoding="utf-8")
    with pytest.raises(EventError, match="cannot read the event payload GITHUB_EVENT_PATH="):
        EventContext.from_environ(env)


def test_missing_repository_says_how_to_set_it(tmp_path):
    env = runner_environment(tmp_path, "push", example("push"))
    del env["GITHUB_REPOSITORY"]
    with pytest.raises(EventError, match="GITHUB_REPOSITORY is not set"):
        EventContext.from_environ(env)
