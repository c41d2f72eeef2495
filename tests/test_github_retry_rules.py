"""Which requests urllib3 repeats for the GitHub client, and which come back to it.

Against the fake GitHub over real HTTP on 127.0.0.1; waits go through a recording sleep.
"""

from __future__ import annotations

from typing import Any

import pytest

from fake_github import FakeGitHub, Fault, Token
from onnx_parity.publishing.github.http import GitHubClient, GitHubError, Response, RetryPolicy

TOKEN = "ghp_" + "R3tryRul3s" * 3
READ_ONLY = "ghs_" + "R3adOnly" * 3
NOW = 1_750_000_000.0
COMMENTS = "/repos/octo/app/issues/7/comments"


class Events:
    """Records the waits and the before_retry calls in the order they happen."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def sleep(self, seconds: float) -> None:
        self.seen.append(seconds)

    def settled_by(self, answer: Response | None):
        def before_retry() -> Response | None:
            self.seen.append("before_retry")
            return answer
        return before_retry


@pytest.fixture
def github():
    with FakeGitHub({TOKEN: Token.user("alice"),
                     READ_ONLY: Token.installation(can_write=False)}) as fake:
        yield fake


@pytest.fixture
def events() -> Events:
    return Events()


def client_for(github: FakeGitHub, events: Events, token: str = TOKEN,
               **policy: Any) -> GitHubClient:
    return GitHubClient(github.url, token, RetryPolicy(**{"timeout_seconds": 5.0, **policy}),
                        sleep=events.sleep, clock=lambda: NOW)


def test_post_after_502_without_before_retry_is_not_sent_again(github, events):
    github.fail_next(Fault.server_error(502), method="POST")
    with pytest.raises(GitHubError) as caught:
        client_for(github, events).request("POST", COMMENTS, {"body": "x"})
    assert caught.value.kind == "unavailable"
    assert caught.value.status == 502
    assert "not sent again" in str(caught.value)
    assert len(github.requests("POST")) == 1
    assert events.seen == []


def test_post_after_502_waits_then_asks_before_retry_then_sends_again(github, events):
    github.fail_next(Fault.server_error(502), method="POST")
    client = client_for(github, events)
    created = client.request("POST", COMMENTS, {"body": "x"},
                             before_retry=events.settled_by(None))
    assert created.status == 201
    assert events.seen == [1.0, "before_retry"]
    assert [e.status for e in github.requests("POST")] == [502, 201]
    assert client.requests_sent == 2


def test_post_created_but_502_settled_by_before_retry_is_not_sent_again(github, events):
    github.fail_next(Fault.created_but_502(), method="POST")
    found = Response(200, {}, {"id": 1})
    answer = client_for(github, events).request("POST", COMMENTS, {"body": "x"},
                                                before_retry=events.settled_by(found))
    assert answer is found
    assert events.seen == [1.0, "before_retry"]
    assert len(github.requests("POST")) == 1
    assert len(github.comments_on("octo/app", 7)) == 1


def test_post_timeout_goes_to_before_retry_not_resent_by_urllib3(github, events):
    github.fail_next(Fault.slow(1.5), method="POST")
    answer = client_for(github, events, timeout_seconds=0.3).request(
        "POST", COMMENTS, {"body": "x"}, before_retry=events.settled_by(Response(200, {}, {})))
    assert answer.status == 200
    assert events.seen == [1.0, "before_retry"]
    assert len(github.requests("POST")) == 1


def test_patch_502_is_repeated_by_urllib3(github, events):
    comment = github.add_comment("octo/app", 7, "old", login="alice")
    github.fail_next(Fault.server_error(502), times=2, method="PATCH")
    client = client_for(github, events)
    answer = client.request("PATCH", f"/repos/octo/app/issues/comments/{comment['id']}",
                            {"body": "new"})
    assert answer.status == 200
    assert events.seen == [1.0, 2.0]
    assert [e.status for e in github.requests("PATCH")] == [502, 502, 200]
    assert github.comments_on("octo/app", 7)[0]["body"] == "new"
    assert client.requests_sent == 3


def test_rate_limit_costs_no_attempt_for_any_method(github, events):
    github.fail_next(Fault.retry_after(1, status=429), method="POST")
    client = client_for(github, events, attempts=1)
    assert client.request("POST", COMMENTS, {"body": "x"}).status == 201
    assert events.seen == [1.0]
    assert client.requests_sent == 2 == len(github.exchanges)


def test_get_403_not_accessible_answered_once(github, events):
    with pytest.raises(GitHubError) as caught:
        client_for(github, events, token=READ_ONLY).request("GET", "/user")
    assert caught.value.kind == "refused"
    assert caught.value.status == 403
    assert caught.value.api_message == "Resource not accessible by integration"
    assert len(github.exchanges) == 1
    assert events.seen == []


def test_secondary_limit_named_only_in_the_body_respects_the_bound(github, events):
    github.fail_next(Fault.secondary_without_header(status=403))
    with pytest.raises(GitHubError) as caught:
        client_for(github, events, max_total_wait_seconds=30).request("GET", "/user")
    assert caught.value.kind == "rate-limited"
    assert "60 s" in str(caught.value)
    assert "30 s bound" in str(caught.value)
    assert len(github.exchanges) == 1
    assert events.seen == []


def test_waits_and_counts_are_shared_across_requests_of_one_client(github, events):
    github.fail_next(Fault.retry_after(100))
    client = client_for(github, events)
    client.request("GET", "/user")
    github.fail_next(Fault.retry_after(30))
    with pytest.raises(GitHubError, match="100 s spent already"):
        client.request("GET", "/user")
    assert events.seen == [100.0]
    assert client.waited_seconds == 100.0
    assert client.requests_sent == 3 == len(github.exchanges)
