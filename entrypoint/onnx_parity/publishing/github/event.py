"""What the workflow run is about: the event, its pull request (if any), and where things live.

Built once from the runner's `GITHUB_*` variables and the event payload at `GITHUB_EVENT_PATH`.
A pull request is "from a fork" when its head repository differs from its base repository, or
when the head repository is gone (`head.repo` is null after the fork was deleted): in both cases
the head's code is not the base repository's to trust.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.errors import UserError

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")


class EventError(UserError):
    """The runner's variables or the event payload are missing or unreadable."""

    title = "event"


@dataclass(frozen=True)
class PullRequest:
    number: int
    head_sha: str
    head_repository: str | None  # None: the fork was deleted
    base_repository: str

    @property
    def is_fork(self) -> bool:
        return self.head_repository != self.base_repository


@dataclass(frozen=True)
class WorkflowRunTrigger:
    """The run a `workflow_run` event reports on: its head commit and the PRs GitHub listed."""

    head_sha: str
    pull_request_numbers: tuple[int, ...]  # empty for fork PRs


@dataclass(frozen=True)
class EventContext:
    name: str
    repository: str  # owner/name of the repository the workflow runs in
    sha: str
    server_url: str
    api_url: str
    run_id: str
    workspace: Path
    pull_request: PullRequest | None
    workflow_run: WorkflowRunTrigger | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> EventContext:
        name = environ.get("GITHUB_EVENT_NAME", "")
        payload = read_payload(environ.get("GITHUB_EVENT_PATH", ""))
        return cls(
            name=name,
            repository=_required(environ, "GITHUB_REPOSITORY"),
            sha=environ.get("GITHUB_SHA", ""),
            server_url=environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/"),
            api_url=environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
            run_id=environ.get("GITHUB_RUN_ID", ""),
            workspace=Path(environ.get("GITHUB_WORKSPACE") or Path.cwd()),
            pull_request=pull_request_of(payload) if name in PULL_REQUEST_EVENTS else None,
            workflow_run=workflow_run_of(payload) if name == "workflow_run" else None,
        )

    @property
    def run_url(self) -> str:
        """The run's page; its summary holds the full report."""
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def checked_sha(self) -> str:
        """The commit whose files were checked: the PR head for PRs, else GITHUB_SHA."""
        if self.pull_request is not None:
            return self.pull_request.head_sha
        if self.workflow_run is not None:
            return self.workflow_run.head_sha
        return self.sha

    def source_base(self, working_directory: str) -> str:
        """Link prefix for `file:line` of findings (files are relative to working_directory)."""
        base = f"{self.server_url}/{self.repository}/blob/{self.checked_sha}"
        folder = working_directory.strip("/")
        return base if folder in ("", ".") else f"{base}/{folder}"


def read_payload(path: str) -> dict[str, Any]:
    if not path:
        return {}
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EventError(
            f"cannot read the event payload GITHUB_EVENT_PATH={path} ({error}). The runner "
            "writes this file; outside GitHub Actions, point GITHUB_EVENT_PATH at a saved event."
        ) from None
    return payload if isinstance(payload, dict) else {}


def pull_request_of(payload: Mapping[str, Any]) -> PullRequest:
    pr = payload.get("pull_request")
    if not isinstance(pr, dict):
        raise EventError("the pull_request event payload has no `pull_request` object.")
    head, base = pr.get("head") or {}, pr.get("base") or {}
    return PullRequest(
        number=int(payload.get("number") or pr.get("number") or 0),
        head_sha=str(head.get("sha", "")),
        head_repository=_full_name(head.get("repo")),
        base_repository=_full_name(base.get("repo")) or "",
    )


def workflow_run_of(payload: Mapping[str, Any]) -> WorkflowRunTrigger:
    run = payload.get("workflow_run")
    if not isinstance(run, dict):
        raise EventError("the workflow_run event payload has no `workflow_run` object.")
    numbers = tuple(int(pr["number"]) for pr in run.get("pull_requests") or [] if "number" in pr)
    return WorkflowRunTrigger(head_sha=str(run.get("head_sha", "")), pull_request_numbers=numbers)


def _full_name(repo: object) -> str | None:
    return str(repo["full_name"]) if isinstance(repo, dict) and repo.get("full_name") else None


def _required(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise EventError(
            f"{name} is not set. The runner sets it for every job; outside GitHub Actions set "
            f"it yourself (e.g. {name}=owner/repo) or use `onnx-parity check`."
        )
    return value
