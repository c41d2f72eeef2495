"""The GitHub client against the fake GitHub over real HTTP on 127.0.0.1.

Waits go through a recording sleep, so the figures (1, 2, 4 s backoff; Retry-After; reset)
are checked exactly without spending them; one test waits on the real clock.
"""

from __future__ import annotations

import logging
import socket
import time
import traceback
from typing import Any

import pytest

from fake_github import FakeGitHub, Fault, RecordingSleep, Token
from onnx_parity.publishing.github.http import GitHubClient, GitHubError, RetryPolicy

TOKEN = "ghp_" + "S3cr3tT0ken" * 3
FIXED_NOW = 1_750_000_000.0


@pytest.fixture
def github():
    with FakeGitHub({TOKEN: Token.user("alice"),
                     "ghs_readonly": Token.installation(can_write=False)}) as fake:
        yield fake


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def client_for(github: FakeGitHub, sleep: RecordingSleep, token: str = TOKEN,
               **policy: Any) -> GitHubClient:
    return GitHubClient(github.url, token, RetryPolicy(**{"timeout_seconds": 5.0, **policy}),
                        sleep=sleep, clock=lambda: FIXED_NOW)


COMMENTS = "/repos/octo/app/issues/7/comments"


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/user", None),
    ("POST", COMMENTS, {"body": "hi"}),
    ("GET", COMMENTS, None),
])
def test_timeout_03s_on_every_request_kind(github, sleep, method, path, body):
    github.fail_next(Fault.slow(1.5), times=1, method=method)
    client = client_for(github, sleep, timeout_seconds=0.3, attempts=1)
    started = time.monotonic()
    with pytest.raises(GitHubError) as caught:
        client.request(method, path, body)
    assert time.monotonic() - started < 1.2
    assert caught.value.status is None
    assert caught.value.kind == "unavailable"
    assert "no answer within 0.3 s" in str(caught.value)


def test_three_502_then_success_waits_1_2_4(github, sleep):
    github.fail_next(Fault.server_error(502), times=3)
    response = client_for(github, sleep).request("GET", "/user")
    assert response.status == 200
    assert response.body["login"] == "alice"
    assert sleep.waits == [1.0, 2.0, 4.0]
    assert len(github.requests("GET", "/user")) == 4


def test_five_503_gives_up_after_5_attempts(github, sleep):
    github.fail_next(Fault.server_error(503), times=10)
    client = client_for(github, sleep)
    with pytest.raises(GitHubError) as caught:
        client.request("GET", "/user")
    assert caught.value.status == 503
    assert caught.value.kind == "unavailable"
    assert "after 5 attempts" in str(caught.value)
    assert sleep.waits == [1.0, 2.0, 4.0, 8.0]
    assert len(github.exchanges) == 5


def test_connection_refused_retried_5_times(sleep):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = GitHubClient(f"http://127.0.0.1:{port}", TOKEN, sleep=sleep)
    with pytest.raises(GitHubError) as caught:
        client.request("GET", "/user")
    assert caught.value.status is None
    assert "connection failed" in str(caught.value)
    assert client.requests_sent == 5
    assert sleep.waits == [1.0, 2.0, 4.0, 8.0]


def test_primary_rate_limit_waits_7s_until_reset(github, sleep):
    github.fail_next(Fault.primary_rate_limit(int(FIXED_NOW) + 7, status=403))
    assert client_for(github, sleep).request("GET", "/user").status == 200
    assert sleep.waits == [7.0]
    assert [e.status for e in github.exchanges] == [403, 200]


def test_retry_after_2_on_429_waits_2s(github, sleep):
    github.fail_next(Fault.retry_after(2, status=429))
    assert client_for(github, sleep).request("GET", "/user").status == 200
    assert sleep.waits == [2.0]


def test_secondary_limit_without_header_waits_60s(github, sleep):
    github.fail_next(Fault.secondary_without_header(status=403))
    assert client_for(github, sleep).request("GET", "/user").status == 200
    assert sleep.waits == [60.0]


def test_rate_limit_reset_in_600s_gives_up_at_once(github, sleep):
    github.fail_next(Fault.primary_rate_limit(int(FIXED_NOW) + 600))
    with pytest.raises(GitHubError) as caught:
        client_for(github, sleep).request("GET", "/user")
    assert caught.value.kind == "rate-limited"
    assert caught.value.status == 403
    assert "600 s" in str(caught.value)
    assert "120 s bound" in str(caught.value)
    assert sleep.waits == []
    assert len(github.exchanges) == 1


def test_total_wait_bound_120s_shared_by_rate_limit_and_backoff(github, sleep):
    github.fail_next(Fault.retry_after(110))
    github.fail_next(Fault.server_error(502), times=10)
    client = client_for(github, sleep)
    with pytest.raises(GitHubError) as caught:
        client.request("GET", "/user")
    # 110 + 1 + 2 + 4 = 117 s; the next backoff (8 s) would cross 120 s, so it stops there,
    # after 4 of the 5 attempts.
    assert sleep.waits == [110.0, 1.0, 2.0, 4.0]
    assert len(github.exchanges) == 5  # the rate-limited one and four 502s
    assert client.waited_seconds <= 120.0
    assert caught.value.status == 502


def test_real_clock_retry_after_1s(github):
    github.fail_next(Fault.retry_after(1))
    started = time.monotonic()
    response = GitHubClient(github.url, TOKEN).request("GET", "/user")
    elapsed = time.monotonic() - started
    assert response.status == 200
    assert 1.0 <= elapsed < 3.0


@pytest.mark.parametrize(("token", "path", "status"), [
    ("ghp_unknown", "/user", 401),
    (TOKEN, "/repos/octo/app/nothing-here", 404),
])
def test_other_4xx_answered_once(github, sleep, token, path, status):
    with pytest.raises(GitHubError) as caught:
        client_for(github, sleep, token=token).request("GET", path)
    assert caught.value.status == status
    assert caught.value.kind == "refused"
    assert len(github.exchanges) == 1
    assert sleep.waits == []


def test_fork_readonly_403_answered_once(github, sleep):
    with pytest.raises(GitHubError) as caught:
        client_for(github, sleep, token="ghs_readonly").request("POST", COMMENTS, {"body": "x"})
    assert caught.value.status == 403
    assert caught.value.api_message == "Resource not accessible by integration"
    assert len(github.exchanges) == 1
    assert sleep.waits == []


def test_paginate_250_items_in_3_pages_of_100(github, sleep):
    for index in range(250):
        github.add_comment("octo/app", 7, f"comment {index}", login=f"user{index % 9}")
    bodies = [c["body"] for c in client_for(github, sleep).paginate(COMMENTS)]
    assert bodies == [f"comment {index}" for index in range(250)]
    pages = github.requests("GET", "comments")
    assert [(e.query["per_page"], e.query.get("page", ["1"])) for e in pages] == [
        (["100"], ["1"]), (["100"], ["2"]), (["100"], ["3"])]


def test_paginate_refuses_link_to_another_host(github, sleep):
    for index in range(3):
        github.add_comment("octo/app", 7, f"c{index}", login="bob")
    # The fake's Link headers name 127.0.0.1; a client configured with "localhost" must not
    # send its token to what is, for it, another host.
    port = github.url.rsplit(":", 1)[1]
    client = GitHubClient(f"http://localhost:{port}", TOKEN, sleep=sleep)
    with pytest.raises(GitHubError, match="refusing to send the token"):
        list(client.paginate(COMMENTS + "?per_page=2"))
    assert len(github.exchanges) == 1


def test_every_request_carries_auth_version_and_accept(github, sleep):
    client = client_for(github, sleep)
    client.request("GET", "/user")
    client.request("POST", COMMENTS, {"body": "x"})
    for exchange in github.exchanges:
        assert exchange.headers["authorization"] == f"Bearer {TOKEN}"
        assert exchange.headers["x-github-api-version"] == "2022-11-28"
        assert exchange.headers["accept"] == "application/vnd.github+json"
    assert github.exchanges[1].body == {"body": "x"}


def test_token_never_in_errors(github, sleep, caplog):
    caplog.set_level(logging.DEBUG)
    github.fail_next(Fault.server_error(502), times=5)
    failures = []
    for token, path, body in [(TOKEN, "/user", None), ("ghs_readonly", COMMENTS, {"body": "x"}),
                              (TOKEN + "x", "/user", None)]:
        with pytest.raises(GitHubError) as caught:
            client_for(github, sleep, token=token).request("POST" if body else "GET", path, body)
        failures.append(caught.value)
    assert [f.status for f in failures] == [502, 403, 401]
    for failure in failures:
        shown = "".join(traceback.format_exception(failure)) + repr(failure)
        assert "S3cr3tT0ken" not in shown
        assert "ghs_readonly" not in shown
    assert caplog.records
    assert "S3cr3tT0ken" not in caplog.text
