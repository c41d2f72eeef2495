"""The sticky pull-request comment of one run: which pull request, the body that fits, the post.

A check comments on pull_request and pull_request_target events only; a report (the two-job
mode) also on workflow_run, whose pull request is looked up from its head commit.
"""

from __future__ import annotations

from onnx_parity.publishing.github.commands import Annotation, fit_markdown
from onnx_parity.publishing.github.comments import BODY_LIMIT, comment_marker, upsert_comment
from onnx_parity.publishing.github.event import PULL_REQUEST_EVENTS
from onnx_parity.publishing.github.http import GitHubError
from onnx_parity.publishing.github.session import Session
from onnx_parity.results import RunResult


def comment_pointer(run_url: str) -> str:
    return (f"_This comment was cut to GitHub's {BODY_LIMIT:,}-character limit; the whole "
            f"report is in [the run's summary]({run_url})._")


def post_comment(session: Session, run: RunResult, config_path: str, source_base: str,
                 from_report: bool) -> str | None:
    if run.shard is not None:
        return None  # one part of the models: the job that merges the shards comments
    number = _comment_target(session, from_report)
    if number is None:
        return None
    budget = BODY_LIMIT - len(comment_marker(config_path)) - 1
    footer = f"[Logs and the whole report: the run's summary]({session.event.run_url})"
    body = fit_markdown(session.renderer(run, source_base, footer), budget, utf16_size,
                        comment_pointer(session.event.run_url)).text
    client = session.client_factory(session.event.api_url, session.token)
    outcome = upsert_comment(client, session.event.repository, number, config_path, body)
    if outcome.warning:
        session.commands.annotate(Annotation("warning", session.redact(outcome.warning),
                                             title="onnx-parity: PR comment"))
    return outcome.url


def _comment_target(session: Session, from_report: bool) -> int | None:
    """The PR to comment on, or None (with a notice when one was expected).

    A check comments on pull_request and pull_request_target events only; a report (the
    two-job mode) also on workflow_run, whose PR is looked up.
    """
    if not session.inputs.comment:
        return None
    if session.event.name not in PULL_REQUEST_EVENTS and not from_report:
        return None
    if not session.token:
        session.commands.annotate(Annotation(
            "warning", "No token: the PR comment was skipped. Pass `github-token` (the default "
            "is the workflow's token) and grant `pull-requests: write`.",
            title="onnx-parity: PR comment"))
        return None
    return resolve_pull_request(session)


def resolve_pull_request(session: Session) -> int | None:
    event = session.event
    if event.pull_request is not None:
        return event.pull_request.number
    if event.workflow_run is None:
        session.commands.annotate(Annotation(
            "notice", f"The {event.name} event names no pull request; no comment was posted.",
            title="onnx-parity: PR comment"))
        return None
    if event.workflow_run.pull_request_numbers:
        return event.workflow_run.pull_request_numbers[0]
    return pull_request_for_commit(session, event.workflow_run.head_sha)


def pull_request_for_commit(session: Session, sha: str) -> int | None:
    """workflow_run events of fork PRs list no PR: ask which open PR has this head commit."""
    client = session.client_factory(session.event.api_url, session.token)
    try:
        pulls = list(client.paginate(f"/repos/{session.event.repository}/commits/{sha}/pulls"))
    except GitHubError as error:
        pulls, reason = [], f"GitHub refused the look-up: {error}"
    else:
        reason = "GitHub lists no pull request with that head commit"
    for pull in pulls:
        if isinstance(pull, dict) and (pull.get("head") or {}).get("sha") == sha:
            return int(pull["number"])
    session.commands.annotate(Annotation(
        "warning", session.redact(f"No pull request found for commit {sha} ({reason}); no "
                                  "comment was posted."), title="onnx-parity: PR comment"))
    return None


def utf16_size(text: str) -> int:
    """GitHub counts a body's characters; UTF-16 units are never fewer, so the count is safe."""
    return len(text.encode("utf-16-le")) // 2
