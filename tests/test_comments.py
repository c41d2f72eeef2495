"""The sticky PR comment against the fake GitHub (real HTTP on 127.0.0.1), and the contract
between the fake and GitHub's official OpenAPI description.

Every scenario's exchanges (what the client sent, what the fake answered) are validated
against the OpenAPI description when the scenario ends.
"""

from __future__ import annotations

import logging

import pytest

import openapi_contract
from fake_github import FakeGitHub, Fault, RecordingSleep, Token
from onnx_parity.publishing.github.comments import comment_marker, upsert_comment
from onnx_parity.publishing.github.http import GitHubClient, RetryPolicy
from openapi_contract import ContractUnavailable, load_contract

REPO, PR, CONFIG = "octo/app", 7, "onnx-parity.toml"
PERSONAL = "ghp_" + "Pers0nalS3cret" * 3
WORKFLOW = "ghs_" + "W0rkflowS3cret" * 3
FORK = "ghs_" + "F0rkS3cret" * 3
APP = "ghs_" + "AppS3cret" * 3
TOKENS = {PERSONAL: Token.user("alice"), WORKFLOW: Token.installation(),
          FORK: Token.installation(can_write=False), APP: Token.installation("parity-app[bot]")}
NOW = 1_750_000_000.0


@pytest.fixture(scope="session")
def contract():
    try:
        return load_contract()
    except ContractUnavailable as error:
        pytest.fail(f"GitHub's OpenAPI description is unavailable: {error}", pytrace=False)


@pytest.fixture
def github(contract):
    with FakeGitHub(TOKENS) as fake:
        yield fake
    assert_exchanges_match_contract(fake, contract)


def assert_exchanges_match_contract(fake: FakeGitHub, contract) -> None:
    for exchange in fake.exchanges:
        contract.validate_request(exchange.method, exchange.path, exchange.body)
        if exchange.status != 401:  # answered before routing; not operation-specific
            contract.validate_response(exchange.method, exchange.path, exchange.status,
                                       exchange.response_body)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def client(github: FakeGitHub, sleep: RecordingSleep, token: str = WORKFLOW,
           timeout: float = 5.0) -> GitHubClient:
    return GitHubClient(github.url, token, RetryPolicy(timeout_seconds=timeout), sleep=sleep,
                        clock=lambda: NOW)


def upsert(github, sleep, body="verdict", token=WORKFLOW, config=CONFIG, timeout=5.0):
    return upsert_comment(client(github, sleep, token, timeout), REPO, PR, config, body)


def ours(github: FakeGitHub, config: str = CONFIG) -> list[dict]:
    return [c for c in github.comments_on(REPO, PR) if comment_marker(config) in c["body"]]


def test_first_run_creates_one_comment(github, sleep):
    outcome = upsert(github, sleep, "## 3 models pass")
    [comment] = github.comments_on(REPO, PR)
    assert outcome.action == "created"
    assert outcome.warning is None
    assert outcome.url == comment["html_url"]
    assert comment["body"] == f"{comment_marker(CONFIG)}\n## 3 models pass"
    assert comment["login"] == "github-actions[bot]"
    assert outcome.requests == 3  # GET /user (403), one page of comments, POST


def test_second_run_updates_still_one(github, sleep):
    first = upsert(github, sleep, "run 1")
    second = upsert(github, sleep, "run 2")
    [comment] = github.comments_on(REPO, PR)
    assert (first.action, second.action) == ("created", "updated")
    assert second.url == first.url
    assert comment["body"].endswith("\nrun 2")
    assert len(github.requests("POST")) == 1
    assert len(github.requests("PATCH")) == 1


def test_250_foreign_comments_and_planted_marker_still_one_ours(github, sleep):
    marker = comment_marker(CONFIG)
    github.add_comment(REPO, PR, f"{marker}\nplanted: all models pass", login="mallory")
    for index in range(250):
        github.add_comment(REPO, PR, f"review note {index}", login=f"reviewer{index % 7}")
    mine = github.add_comment(REPO, PR, f"{marker}\nold verdict", "github-actions[bot]", "Bot")
    github.add_comment(REPO, PR, f"quoting: {marker}", login="mallory")
    outcome = upsert(github, sleep, "new verdict")
    assert outcome.action == "updated"
    assert [c["id"] for c in ours(github)] == [1001, mine["id"], mine["id"] + 1]
    assert github.comments_on(REPO, PR)[0]["body"].endswith("planted: all models pass")
    assert [c for c in github.comments_on(REPO, PR) if c["id"] == mine["id"]][0][
        "body"].endswith("\nnew verdict")
    assert len(github.comments_on(REPO, PR)) == 253
    assert len(github.requests("GET", "comments$")) == 3  # 253 comments = 3 pages of 100
    assert github.requests("PATCH")[0].path.endswith(f"/comments/{mine['id']}")


def test_planted_marker_alone_is_never_updated(github, sleep):
    planted = github.add_comment(REPO, PR, f"{comment_marker(CONFIG)}\nfake", login="mallory")
    outcome = upsert(github, sleep, "real verdict")
    assert outcome.action == "created"
    assert len(ours(github)) == 2
    assert github.comments_on(REPO, PR)[0] == planted


def test_personal_token_matches_its_login_not_bots(github, sleep):
    marker = comment_marker(CONFIG)
    github.add_comment(REPO, PR, f"{marker}\nbot's", "github-actions[bot]", "Bot")
    mine = github.add_comment(REPO, PR, f"{marker}\nalice's", login="alice")
    outcome = upsert(github, sleep, "by alice", token=PERSONAL)
    assert outcome.action == "updated"
    assert github.requests("PATCH")[0].path.endswith(f"/comments/{mine['id']}")
    assert [e.status for e in github.requests("GET", "^/user$")] == [200]


def test_app_token_matches_its_bot(github, sleep):
    github.add_comment(REPO, PR, f"{comment_marker(CONFIG)}\nold", "parity-app[bot]", "Bot")
    assert upsert(github, sleep, "new", token=APP).action == "updated"
    assert len(github.comments_on(REPO, PR)) == 1


def test_two_configs_keep_two_comments(github, sleep):
    upsert(github, sleep, "a", config="onnx-parity.toml")
    upsert(github, sleep, "b", config="models/onnx-parity.toml")
    upsert(github, sleep, "a2", config="onnx-parity.toml")
    assert len(github.comments_on(REPO, PR)) == 2
    assert ours(github)[0]["body"].endswith("\na2")


def test_two_old_duplicates_update_newest_only(github, sleep):
    marker = comment_marker(CONFIG)
    older = github.add_comment(REPO, PR, f"{marker}\nrace 1", "github-actions[bot]", "Bot")
    newer = github.add_comment(REPO, PR, f"{marker}\nrace 2", "github-actions[bot]", "Bot")
    assert upsert(github, sleep, "latest").action == "updated"
    bodies = {c["id"]: c["body"] for c in github.comments_on(REPO, PR)}
    assert bodies[older["id"]].endswith("race 1")
    assert bodies[newer["id"]].endswith("latest")


def test_three_502_then_success_one_comment(github, sleep):
    github.fail_next(Fault.server_error(502), times=3, method="POST")
    outcome = upsert(github, sleep)
    assert outcome.action == "created"
    assert len(github.comments_on(REPO, PR)) == 1
    assert [e.status for e in github.requests("POST")] == [502, 502, 502, 201]
    assert sleep.waits == [1.0, 2.0, 4.0]
    # Before each repeated POST the comments are listed again: 1 + 3 listings.
    assert len(github.requests("GET", "comments$")) == 4


def test_three_created_but_502_then_update_one_comment(github, sleep):
    github.fail_next(Fault.created_but_502(), times=3, method="POST")
    outcome = upsert(github, sleep, "verdict")
    [comment] = github.comments_on(REPO, PR)
    assert outcome.action == "created"
    assert outcome.url == comment["html_url"]
    assert len(github.requests("POST")) == 1
    assert len(github.requests("PATCH")) == 1


def test_rate_limited_retry_after_2_waits_then_posts_once(github, sleep):
    github.fail_next(Fault.retry_after(2, status=403), method="POST")
    outcome = upsert(github, sleep)
    assert outcome.action == "created"
    assert sleep.waits == [2.0]
    assert [e.status for e in github.requests("POST")] == [403, 201]
    assert len(github.comments_on(REPO, PR)) == 1


def test_rate_limit_reset_in_10_minutes_fails_with_warning(github, sleep):
    github.fail_next(Fault.primary_rate_limit(int(NOW) + 600), method="POST")
    outcome = upsert(github, sleep)
    assert outcome.action == "failed"
    assert sleep.waits == []
    assert "rate limit" in outcome.warning
    assert "120 s" in outcome.warning
    assert github.comments_on(REPO, PR) == []


def test_fork_403_one_attempt_warning(github, sleep):
    outcome = upsert(github, sleep, token=FORK)
    assert outcome.action == "failed"
    assert outcome.url is None
    assert len(github.requests("POST")) == 1
    assert sleep.waits == []
    assert outcome.requests == 3
    for words in ("Resource not accessible by integration", "forks", "read-only",
                  "workflow_run", "README", "pull-requests: write"):
        assert words in outcome.warning
    assert "\n" not in outcome.warning  # one paragraph


def test_422_too_long_not_retried(github, sleep):
    outcome = upsert(github, sleep, "x" * 70_000)
    assert outcome.action == "failed"
    assert "65,536" in outcome.warning
    assert [e.status for e in github.requests("POST")] == [422]
    assert sleep.waits == []
    assert github.comments_on(REPO, PR) == []


def test_body_of_65536_with_marker_is_accepted(github, sleep):
    body = "y" * (65_536 - len(comment_marker(CONFIG)) - 1)
    assert upsert(github, sleep, body).action == "created"


def test_slow_answer_times_out_then_retries(github, sleep):
    github.fail_next(Fault.slow(1.5), method="GET", path="comments$")
    outcome = upsert(github, sleep, timeout=0.3)
    assert outcome.action == "created"
    assert sleep.waits == [1.0]
    assert len(github.requests("GET", "comments$")) == 2
    assert len(github.comments_on(REPO, PR)) == 1


def test_slow_post_created_then_timeout_no_duplicate(github, sleep):
    github.fail_next(Fault.slow(1.5), method="POST")
    outcome = upsert(github, sleep, timeout=0.3)
    assert outcome.action == "created"
    assert len(github.comments_on(REPO, PR)) == 1
    assert len(github.requests("POST")) == 1
    assert len(github.requests("PATCH")) == 1


def test_github_down_fails_after_5_attempts_without_raising(github, sleep):
    github.fail_next(Fault.server_error(503), times=20)
    outcome = upsert(github, sleep)
    assert outcome.action == "failed"
    assert "after 5 attempts" in outcome.warning
    assert outcome.requests == 5
    assert sleep.waits == [1.0, 2.0, 4.0, 8.0]


def test_token_never_in_errors(github, sleep, caplog):
    caplog.set_level(logging.DEBUG)
    github.fail_next(Fault.server_error(502), times=5)
    warnings = [upsert(github, sleep).warning, upsert(github, sleep, token=FORK).warning,
                upsert(github, sleep, token=WORKFLOW + "x").warning,
                upsert(github, sleep, "z" * 70_000).warning]
    assert all(warnings)
    for secret in ("W0rkflowS3cret", "F0rkS3cret"):
        assert not any(secret in w for w in warnings)
        assert secret not in caplog.text


def test_marker_names_config_and_cannot_be_closed_early():
    assert "onnx-parity.toml" in comment_marker("onnx-parity.toml")
    assert comment_marker("a.toml") != comment_marker("b.toml")
    evil = comment_marker("x --> <img src=y>")
    assert evil.startswith("<!--")
    assert evil.count("-->") == 1
    assert evil.endswith("-->")


# -- the fake against GitHub's OpenAPI description ------------------------------------

def test_fake_answers_validate_for_each_operation(contract, sleep):
    with FakeGitHub(TOKENS) as fake:
        fake.add_pull(REPO, 7, "a" * 40, head_repository="someone/app")
        client(fake, sleep, PERSONAL).request("GET", "/user")
        upsert(fake, sleep, "one")  # GET /user 403, list, POST 201
        upsert(fake, sleep, "two")  # list, PATCH 200
        upsert(fake, sleep, "q" * 70_000)  # PATCH 422
        comments = f"/repos/{REPO}/issues/8/comments"
        upsert_comment(client(fake, sleep), REPO, 8, CONFIG, "q" * 70_000)  # POST 422
        upsert_comment(client(fake, sleep, FORK), REPO, 8, CONFIG, "f")  # POST 403
        pulls = list(client(fake, sleep).paginate(f"/repos/{REPO}/commits/{'a' * 40}/pulls"))
    assert fake.comments_on(REPO, 8) == []
    assert len(fake.requests("POST", comments)) == 2
    assert [p["number"] for p in pulls] == [7]
    checked = set()
    for e in fake.exchanges:
        contract.validate_request(e.method, e.path, e.body)
        if contract.validate_response(e.method, e.path, e.status, e.response_body):
            checked.add((e.method, contract.operation(e.method, e.path).template, e.status))
    assert checked == {
        ("GET", "/user", 200), ("GET", "/user", 403),
        ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 200),
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 201),
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 403),
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 422),
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", 200),
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", 422),
        ("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls", 200),
    }


def test_contract_rejects_a_wrong_answer(contract):
    with pytest.raises(AssertionError, match="does not match GitHub's OpenAPI"):
        contract.validate_response("POST", f"/repos/{REPO}/issues/7/comments", 201,
                                   {"id": "not-an-integer", "body": "x"})
    with pytest.raises(AssertionError, match="does not match GitHub's OpenAPI"):
        contract.validate_request("PATCH", f"/repos/{REPO}/issues/comments/5", {"text": "x"})


def test_contract_without_npm_is_a_clear_failure_not_a_skip(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on it, and an empty cache
    with pytest.raises(ContractUnavailable, match=r"npm is not installed.*Install Node.js/npm"):
        openapi_contract.load_contract(tmp_path / "cache")
