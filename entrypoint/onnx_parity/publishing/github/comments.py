"""The sticky PR comment: one comment per configuration file, created once, then updated.

Finding our comment safely:
- the body starts with a hidden HTML marker that names the configuration file, so two
  configurations in one repository keep two comments;
- ALL comments are read (100 a page, following `Link` to the last page): reading only the
  first page posts a duplicate on every run of a busy PR;
- the marker counts only on comments written by the token's own identity, so nobody can plant
  a marker in a comment of theirs and have the action overwrite or hide behind it.
  `GET /user` names the identity of a personal token. The workflow's GITHUB_TOKEN (and any
  GitHub App installation token) answers 403 there; such tokens write as a bot, so we then
  accept comments whose author has `type == "Bot"` and a login ending in `[bot]`
  (`github-actions[bot]`, or `<app>[bot]` for an App's token). Only Apps installed on the
  repository can write as a bot, never a fork's author.

GitHub can create a comment and still answer 5xx or time out; before a POST is sent again the
comments are listed once more and the comment, if it now exists, is updated instead, so
retries never leave duplicates behind.

`upsert_comment` never raises: a failure comes back as `action="failed"` with one paragraph
saying what failed, why and how to fix it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from onnx_parity.publishing.github.http import GitHubClient, GitHubError, Response

WORKFLOW_TOKEN_LOGIN = "github-actions[bot]"
BODY_LIMIT = 65_536  # characters GitHub accepts in one comment body
FORK_HELP = (
    "On pull requests from forks GitHub gives the workflow a read-only token, so no job "
    "triggered by `pull_request` can comment there. Use the two-job `workflow_run` mode "
    "described in the README (the check job uploads the report, a second job with "
    "`pull-requests: write` posts it); the verdict, the job summary and the exit code of "
    "this job are unaffected."
)


@dataclass(frozen=True)
class CommentOutcome:
    action: str  # "created" | "updated" | "failed"
    url: str | None  # html_url of our comment
    warning: str | None  # one paragraph: what failed, why, how to fix
    requests: int  # HTTP requests made, retries included


@dataclass(frozen=True)
class Author:
    """Whose comments count as ours: one login, or (login None) any `[bot]` account."""

    login: str | None

    def wrote(self, comment: dict[str, Any]) -> bool:
        user = comment.get("user") or {}
        login = str(user.get("login", ""))
        if self.login is not None:
            return login == self.login
        return user.get("type") == "Bot" and (
            login == WORKFLOW_TOKEN_LOGIN or login.endswith("[bot]"))


def comment_marker(config_path: str) -> str:
    """The hidden first line of our comment; `<`, `>` are escaped so the path cannot end it."""
    quoted = urllib.parse.quote(config_path, safe="/._-~ @+=:,")
    return f"<!-- onnx-parity:sticky-comment config={quoted} -->"


def upsert_comment(client: GitHubClient, repository: str, pr_number: int, config_path: str,
                   body: str) -> CommentOutcome:
    """Create our comment on the PR, or update it in place if it exists already."""
    before = client.requests_sent
    target = _Target(client, repository, pr_number, comment_marker(config_path))
    try:
        action, url = target.upsert(f"{target.marker}\n{body}")
    except GitHubError as error:
        return CommentOutcome("failed", None, _warning(error, target),
                              client.requests_sent - before)
    return CommentOutcome(action, url, None, client.requests_sent - before)


class _Target:
    """One PR's comment thread and the marker we look for in it."""

    def __init__(self, client: GitHubClient, repository: str, pr_number: int, marker: str):
        self.client = client
        self.repository = repository
        self.pr_number = pr_number
        self.marker = marker
        self.author: Author | None = None

    @property
    def comments_path(self) -> str:
        return f"/repos/{self.repository}/issues/{self.pr_number}/comments"

    def upsert(self, full_body: str) -> tuple[str, str | None]:
        self.author = _token_author(self.client)
        existing = self.find_ours()
        if existing is not None:
            return "updated", _html_url(self.update(existing, full_body))
        created = self.client.request("POST", self.comments_path, {"body": full_body},
                                      before_retry=lambda: self.settle_post(full_body))
        return "created", _html_url(created)

    def find_ours(self) -> dict[str, Any] | None:
        """Our newest marked comment; older duplicates (from past races) are left alone."""
        assert self.author is not None
        ours = [c for c in self.client.paginate(self.comments_path)
                if isinstance(c, dict) and self.author.wrote(c)
                and self.marker in str(c.get("body") or "")]
        return max(ours, key=lambda c: (str(c.get("created_at", "")), int(c["id"])),
                   default=None)

    def update(self, comment: dict[str, Any], full_body: str) -> Response:
        path = f"/repos/{self.repository}/issues/comments/{comment['id']}"
        return self.client.request("PATCH", path, {"body": full_body})

    def settle_post(self, full_body: str) -> Response | None:
        """After a POST failed without a clear answer: did it create the comment after all?"""
        existing = self.find_ours()
        return None if existing is None else self.update(existing, full_body)


def _token_author(client: GitHubClient) -> Author:
    try:
        user = client.request("GET", "/user").body
    except GitHubError as error:
        if error.status == 403:  # installation tokens (GITHUB_TOKEN, Apps) may not read /user
            return Author(None)
        raise
    login = user.get("login") if isinstance(user, dict) else None
    return Author(str(login)) if login else Author(None)


def _html_url(response: Response) -> str | None:
    body = response.body
    return str(body["html_url"]) if isinstance(body, dict) and "html_url" in body else None


def _warning(error: GitHubError, target: _Target) -> str:
    where = f"the onnx-parity comment on {target.repository}#{target.pr_number}"
    lead = f"Could not create or update {where}: {error}."
    if error.status == 403 and "not accessible by integration" in error.api_message.lower():
        return f"{lead} {FORK_HELP} On a same-repository PR, grant the job " \
               "`permissions: pull-requests: write`."
    return f"{lead} {_fix_for(error)}"


def _fix_for(error: GitHubError) -> str:
    if error.kind == "rate-limited":
        return ("GitHub's API rate limit for this token is exhausted; the comment will be "
                "written by the next run, or use a token with its own limit.")
    if error.kind == "unavailable":
        return ("GitHub did not answer successfully on any attempt; re-run the job, and check "
                "the status page of GitHub (or of your GitHub Enterprise Server) if it persists.")
    fixes = {
        401: "The token was refused: pass a valid token in the `github-token` input.",
        403: "The token may not write comments: grant the job "
             "`permissions: pull-requests: write`, or pass a token that has it.",
        404: "The repository or pull request was not found with this token: check "
             "`GITHUB_REPOSITORY`, the PR number, and that the token can read the repository.",
        422: f"GitHub refused the body (it allows at most {BODY_LIMIT:,} characters); the "
             "report is in the job summary.",
    }
    return fixes.get(error.status or 0, "See GitHub's message above.")
