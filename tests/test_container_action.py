"""The action as GitHub runs it: the image built from the Dockerfile, started like a Docker
action (INPUT_* variables, /github mounts, `--network host`) against the fake GitHub.

Builds the image with .ci/container.sh (podman, a debootstrap bookworm base, the local torch
wheel). Needs root, as on CI; on a machine without root the tests say so and skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from fake_github import FakeGitHub, Token
from test_action_inputs import example
from test_workflow_commands import parse_output_file

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTAINER = REPO_ROOT / ".ci" / "container.sh"
EXAMPLE = REPO_ROOT / "examples" / "seed-failures"
TOKEN = "ghs_containerTestToken0123456789abcdefXYZ"
EXPECTED_FAILED = "small-cnn-frozen,branchy,spectrum-torchscript,spectral-head"
# The tag .ci/container.sh builds and runs; set ONNX_PARITY_IMAGE to keep a second image apart
# (e.g. a branch's build beside the one CI made) on a machine whose podman storage is shared.
IMAGE = os.environ.get("ONNX_PARITY_IMAGE", "localhost/onnx-parity:ci")

pytestmark = [pytest.mark.container, pytest.mark.slow]


@pytest.fixture(scope="module")
def image() -> str:
    if os.geteuid() != 0:
        pytest.skip("building the image needs root (podman, debootstrap), as on CI")
    build = subprocess.run(["bash", str(CONTAINER), "build"], capture_output=True, text=True,
                           timeout=2400)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    print(build.stdout[-1500:])
    return IMAGE


@dataclass
class ActionRun:
    code: int
    console: str
    runner: Path
    workspace: Path

    @property
    def outputs(self) -> dict[str, str]:
        return parse_output_file((self.runner / "file_commands" / "output").read_text())

    @property
    def summary(self) -> str:
        return (self.runner / "file_commands" / "step_summary").read_text(encoding="utf-8")

    @property
    def action_lines(self) -> list[str]:
        """What the container printed (container.sh's own lines left out)."""
        return [line for line in self.console.splitlines()
                if not line.startswith("container.sh:")]

    def written_bytes(self) -> bytes:
        """Everything the action wrote apart from the `::add-mask::` line the runner consumes:
        console, runner files (outputs, summary) and the output folder."""
        assert self.action_lines[0] == f"::add-mask::{TOKEN}"  # first, before anything else
        chunks = ["\n".join(self.action_lines[1:]).encode()]
        for root in (self.runner, self.workspace / "onnx-parity-out"):
            chunks += [p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()]
        return b"\n".join(chunks)


def run_in_container(tmp_path: Path, github: FakeGitHub, payload: dict, event: str,
                     network: str = "host") -> ActionRun:
    workspace = tmp_path / "workspace"
    if not workspace.exists():
        shutil.copytree(EXAMPLE, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    event_file = tmp_path / f"{event}.json"
    event_file.write_text(json.dumps(payload), encoding="utf-8")
    env = {
        "INPUT_GITHUB-TOKEN": TOKEN, "INPUT_COMMENT": "true", "INPUT_FAIL-ON": "error",
        "INPUT_CONFIG": "", "INPUT_WORKING-DIRECTORY": ".", "INPUT_OUTPUT-DIR": "onnx-parity-out",
        "INPUT_REQUIREMENTS": "", "INPUT_COMMENT-FROM-REPORT": "",
        "INPUT_RUN-FORK-CODE-WITH-WRITE-TOKEN": "false",
        "GITHUB_EVENT_NAME": event, "GITHUB_REPOSITORY": payload["repository"]["full_name"],
        "GITHUB_SHA": "a" * 40, "GITHUB_API_URL": github.url,
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77",
    }
    env_file = tmp_path / f"{event}.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()), encoding="utf-8")
    runner = tmp_path / f"runner-{event}"
    done = subprocess.run(
        ["bash", str(CONTAINER), "run-action", str(workspace), str(event_file), str(env_file),
         str(runner)], capture_output=True, text=True, timeout=1200,
        env={**os.environ, "ONNX_PARITY_NETWORK": network})
    return ActionRun(done.returncode, done.stdout + done.stderr, runner, workspace)


@pytest.fixture(scope="module")
def github():
    with FakeGitHub({TOKEN: Token.installation()}) as server:
        yield server


@pytest.mark.usefixtures("image")
def test_pull_request_in_the_image_comments_once_then_updates_in_place(github, tmp_path):
    opened = example("pull_request", "opened")
    repository, number = opened["repository"]["full_name"], opened["number"]
    first = run_in_container(tmp_path, github, opened, "pull_request")
    print(first.console[-3000:])
    assert first.code == 1, first.console[-4000:]  # four of the six example models fail

    comments = github.comments_on(repository, number)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert "onnx-parity.toml" in body
    assert "2 of 6 models pass" in body
    assert "`frozen-dimension`" in body
    assert "aten::fft_rfft" in body
    head_sha = opened["pull_request"]["head"]["sha"]
    assert f"/blob/{head_sha}/models/branchy.py#L9" in body  # links at the PR's head

    outputs = first.outputs
    assert outputs["passed"] == "false"
    assert outputs["failed-models"] == EXPECTED_FAILED
    assert outputs["comment-url"] == comments[0]["html_url"]
    assert (first.workspace / outputs["report-json"]).is_file()
    assert "| ❌ | `branchy` |" in first.summary
    assert re.search(r"::error file=models/branchy\.py,line=9,", first.console)
    assert "::group::onnx-parity: small-cnn" in first.console

    synchronize = example("pull_request", "synchronize")
    synchronize["number"] = number
    synchronize["pull_request"]["number"] = number
    synchronize["repository"] = opened["repository"]
    second = run_in_container(tmp_path, github, synchronize, "pull_request")
    assert second.code == 1
    comments_after = github.comments_on(repository, number)
    assert len(comments_after) == 1
    assert comments_after[0]["id"] == comments[0]["id"]

    for run in (first, second):
        assert TOKEN.encode() not in run.written_bytes()
    for exchange in github.requests():
        assert TOKEN not in json.dumps(exchange.body or "")


@pytest.mark.usefixtures("image")
def test_push_in_the_image_needs_no_network_and_writes_summary_and_outputs(github, tmp_path):
    """No comment to post: the image runs with no network at all (nothing fetched at run time)."""
    push = example("push")
    before = len(github.requests())
    run = run_in_container(tmp_path, github, push, "push", network="none")
    assert run.code == 1, run.console[-3000:]
    assert run.outputs["failed-models"] == EXPECTED_FAILED
    assert run.outputs.get("comment-url", "") == ""
    assert "ONNX parity: 2 of 6 models pass" in run.summary
    assert len(github.requests()) == before  # not one request to the API
    assert TOKEN.encode() not in run.written_bytes()
