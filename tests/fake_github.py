"""A fake GitHub REST API: a real HTTP server on 127.0.0.1 with state, for the publishing tests.

It serves the operations onnx-parity uses, with GitHub's answer shapes (checked against the
official OpenAPI description by `openapi_contract.py`):

    GET   /user                                          per token: login, or 403 for an
                                                         installation token
    GET   /repos/{o}/{r}/issues/{n}/comments             paginated (30 a page, at most 100)
    POST  /repos/{o}/{r}/issues/{n}/comments             201; 422 over 65,536 characters
    PATCH /repos/{o}/{r}/issues/comments/{id}            200; 422 over 65,536 characters
    GET   /repos/{o}/{r}/commits/{sha}/pulls             PRs whose head is that commit

Every request needs a known token (else 401); read-only tokens get 403 "Resource not
accessible by integration" on writes, as a fork PR's GITHUB_TOKEN does. Faults queued with
`fail_next` answer the next matching requests instead (5xx, "created but answered 502",
rate limits, slow answers). Every exchange is recorded in `exchanges`.

    with FakeGitHub({"ghp_me": Token.user("alice")}) as github:
        client = GitHubClient(github.url, "ghp_me")
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BODY_LIMIT = 65_536
DOCS = "https://docs.github.com/rest"
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
NOT_ACCESSIBLE = "Resource not accessible by integration"


@dataclass(frozen=True)
class Token:
    """Who a token acts as: `login` writes the comments; `personal` decides GET /user."""

    login: str
    user_type: str = "User"
    personal: bool = True
    can_write: bool = True

    @staticmethod
    def user(login: str, can_write: bool = True) -> Token:
        return Token(login, "User", True, can_write)

    @staticmethod
    def installation(login: str = "github-actions[bot]", can_write: bool = True) -> Token:
        return Token(login, "Bot", False, can_write)


@dataclass(frozen=True)
class Fault:
    """One canned misbehaviour, answered instead of (or after) the real operation."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: object = None
    apply_first: bool = False  # carry out the operation, then answer with the fault
    delay_seconds: float = 0.0  # answer only after this long (apply_first: then answer normally)

    @staticmethod
    def server_error(status: int = 502) -> Fault:
        return Fault(status, (("Content-Type", "text/html"),), "<html>Bad Gateway</html>")

    @staticmethod
    def created_but_502() -> Fault:
        return Fault(502, (("Content-Type", "text/html"),), "<html>Bad Gateway</html>", True)

    @staticmethod
    def primary_rate_limit(reset_epoch: int, status: int = 403) -> Fault:
        headers = (("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "0"),
                   ("x-ratelimit-reset", str(reset_epoch)))
        return Fault(status, headers, _error_body("API rate limit exceeded for user."))

    @staticmethod
    def retry_after(seconds: int, status: int = 429) -> Fault:
        return Fault(status, (("Retry-After", str(seconds)),),
                     _error_body("You have exceeded a secondary rate limit."))

    @staticmethod
    def secondary_without_header(status: int = 403) -> Fault:
        return Fault(status, (), _error_body("You have exceeded a secondary rate limit."))

    @staticmethod
    def slow(seconds: float) -> Fault:
        """The operation happens, but the answer comes only after `seconds`."""
        return Fault(0, (), None, True, seconds)


@dataclass
class Exchange:
    """One request as the server saw it, and what it answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # the parsed JSON request body
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: object = None


@dataclass
class _Queued:
    fault: Fault
    method: str | None
    path_pattern: str | None

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path_pattern is None or re.search(self.path_pattern, path) is not None))


@dataclass
class _Pull:
    repository: str
    number: int
    head_sha: str
    head_repository: str
    author: str


class RecordingSleep:
    """Hand it to GitHubClient as `sleep`: the waits are recorded, none is slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class FakeGitHub:
    def __init__(self, tokens: dict[str, Token]) -> None:
        self.tokens = dict(tokens)
        self.exchanges: list[Exchange] = []
        self.comments: dict[tuple[str, int], list[dict]] = {}
        self.pulls: list[_Pull] = []
        self._faults: list[_Queued] = []
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- arranging state -------------------------------------------------------------

    def add_comment(self, repository: str, pr: int, body: str, login: str,
                    user_type: str = "User") -> dict:
        with self._lock:
            return self._create_comment(repository, pr, body, login, user_type)

    def add_pull(self, repository: str, number: int, head_sha: str,
                 head_repository: str | None = None, author: str = "octocat") -> None:
        self.pulls.append(_Pull(repository, number, head_sha, head_repository or repository,
                                author))

    def fail_next(self, fault: Fault, times: int = 1, method: str | None = None,
                  path: str | None = None) -> None:
        """Answer the next `times` requests matching `method` and the regex `path` with `fault`."""
        with self._lock:
            self._faults.extend(_Queued(fault, method, path) for _ in range(times))

    # -- reading state ---------------------------------------------------------------

    def comments_on(self, repository: str, pr: int) -> list[dict]:
        with self._lock:
            return [dict(c) for c in self.comments.get((repository, pr), [])]

    def requests(self, method: str | None = None, path: str | None = None) -> list[Exchange]:
        return [e for e in self.exchanges
                if (method is None or e.method == method)
                and (path is None or re.search(path, e.path))]

    # -- serving ---------------------------------------------------------------------

    def handle(self, exchange: Exchange) -> tuple[int, dict[str, str], object]:
        """Answer one request; called on the server's threads."""
        token = self.tokens.get(_bearer(exchange.headers))
        if token is None:
            return 401, {}, _error_body("Bad credentials")
        fault = self._take_fault(exchange.method, exchange.path)
        if fault is None:
            return self._operate(exchange, token)
        if not fault.apply_first:
            time.sleep(fault.delay_seconds)
            return fault.status, dict(fault.headers), fault.body
        answer = self._operate(exchange, token)
        time.sleep(fault.delay_seconds)
        return answer if fault.status == 0 else (fault.status, dict(fault.headers), fault.body)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for index, queued in enumerate(self._faults):
                if queued.matches(method, path):
                    return self._faults.pop(index).fault
        return None

    def _operate(self, exchange: Exchange, token: Token) -> tuple[int, dict[str, str], object]:
        for method, pattern, operation in _ROUTES:
            match = re.fullmatch(pattern, exchange.path)
            if match and method == exchange.method:
                with self._lock:
                    return operation(self, exchange, token, *match.groups())
        return 404, {}, _error_body("Not Found")

    # -- operations (called with the lock held) --------------------------------------

    def _get_user(self, _exchange: Exchange, token: Token) -> tuple[int, dict, object]:
        if not token.personal:
            return 403, {}, _error_body(NOT_ACCESSIBLE)
        return 200, {}, self._private_user(token.login)

    def _list_comments(self, exchange: Exchange, _token: Token, owner: str, repo: str,
                       number: str) -> tuple[int, dict, object]:
        items = self.comments.get((f"{owner}/{repo}", int(number)), [])
        return self._page(exchange, [self._comment_json(c) for c in items])

    def _create(self, exchange: Exchange, token: Token, owner: str, repo: str,
                number: str) -> tuple[int, dict, object]:
        refused = _refuse_write(exchange, token)
        if refused:
            return refused
        comment = self._create_comment(f"{owner}/{repo}", int(number), exchange.body["body"],
                                       token.login, token.user_type)
        return 201, {"Location": comment["url"]}, self._comment_json(comment)

    def _update(self, exchange: Exchange, token: Token, owner: str, repo: str,
                comment_id: str) -> tuple[int, dict, object]:
        refused = _refuse_write(exchange, token)
        if refused:
            return refused
        comment = self._find_comment(f"{owner}/{repo}", int(comment_id))
        if comment is None:
            return 404, {}, _error_body("Not Found")
        if comment["login"] != token.login:
            return 403, {}, _error_body("You must have push access to edit this comment.")
        comment["body"] = exchange.body["body"]
        comment["updated_at"] = self._now()
        return 200, {}, self._comment_json(comment)

    def _pulls_for_commit(self, exchange: Exchange, _token: Token, owner: str, repo: str,
                          sha: str) -> tuple[int, dict, object]:
        pulls = [p for p in self.pulls if p.repository == f"{owner}/{repo}" and p.head_sha == sha]
        return self._page(exchange, [self._pull_json(p) for p in pulls])

    # -- helpers ---------------------------------------------------------------------

    def _create_comment(self, repository: str, pr: int, body: str, login: str,
                        user_type: str) -> dict:
        self._next_id += 1
        now = self._now()
        comment = {"id": self._next_id, "repository": repository, "pr": pr, "body": body,
                   "login": login, "user_type": user_type, "created_at": now, "updated_at": now,
                   "url": f"{self.url}/repos/{repository}/issues/comments/{self._next_id}",
                   "html_url": f"https://github.test/{repository}/pull/{pr}"
                               f"#issuecomment-{self._next_id}"}
        self.comments.setdefault((repository, pr), []).append(comment)
        return comment

    def _find_comment(self, repository: str, comment_id: int) -> dict | None:
        for (repo, _), items in self.comments.items():
            for comment in items:
                if repo == repository and comment["id"] == comment_id:
                    return comment
        return None

    def _now(self) -> str:
        # A clock that advances one second per write keeps "newest" unambiguous.
        return (EPOCH + timedelta(seconds=self._next_id)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _page(self, exchange: Exchange, items: list) -> tuple[int, dict, object]:
        per_page = min(int(exchange.query.get("per_page", ["30"])[0]), 100)
        page = max(int(exchange.query.get("page", ["1"])[0]), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page: page * per_page]
        links = self._links(exchange, per_page, page, last)
        return 200, ({"Link": links} if links else {}), chunk

    def _links(self, exchange: Exchange, per_page: int, page: int, last: int) -> str:
        def url(n: int) -> str:
            query = {k: v[0] for k, v in exchange.query.items()} | {"per_page": str(per_page),
                                                                    "page": str(n)}
            return f"<{self.url}{exchange.path}?{urllib.parse.urlencode(query)}>"
        rels = []
        if page > 1:
            rels += [f'{url(page - 1)}; rel="prev"', f'{url(1)}; rel="first"']
        if page < last:
            rels += [f'{url(page + 1)}; rel="next"', f'{url(last)}; rel="last"']
        return ", ".join(rels)

    def _comment_json(self, comment: dict) -> dict:
        repository = comment["repository"]
        return {
            "id": comment["id"], "node_id": f"IC_{comment['id']}", "url": comment["url"],
            "html_url": comment["html_url"], "body": comment["body"],
            "user": self._simple_user(comment["login"], comment["user_type"]),
            "created_at": comment["created_at"], "updated_at": comment["updated_at"],
            "issue_url": f"{self.url}/repos/{repository}/issues/{comment['pr']}",
            "author_association": "NONE" if comment["user_type"] == "Bot" else "CONTRIBUTOR",
            "performed_via_github_app": None,
        }

    def _simple_user(self, login: str, user_type: str = "User") -> dict:
        api = f"{self.url}/users/{urllib.parse.quote(login)}"
        return {
            "login": login, "id": zlib.crc32(login.encode()) % 10_000_000, "node_id": f"U_{login}",
            "avatar_url": f"https://avatars.github.test/{login}", "gravatar_id": "",
            "url": api, "html_url": f"https://github.test/{login}",
            "followers_url": f"{api}/followers", "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions", "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events", "type": user_type,
            "site_admin": False, "user_view_type": "public",
        }

    def _private_user(self, login: str) -> dict:
        when = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._simple_user(login) | {
            "user_view_type": "private", "name": login, "company": None, "blog": "",
            "location": None, "email": None, "hireable": None, "bio": None,
            "public_repos": 1, "public_gists": 0, "followers": 0, "following": 0,
            "created_at": when, "updated_at": when, "private_gists": 0,
            "total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0,
            "collaborators": 0, "two_factor_authentication": True,
        }

    def _repository_json(self, full_name: str) -> dict:
        owner, name = full_name.split("/")
        api = f"{self.url}/repos/{full_name}"
        when = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
        urls = {f"{key}_url": f"{api}/{key}" for key in (
            "archive", "assignees", "blobs", "branches", "collaborators", "comments", "commits",
            "compare", "contents", "contributors", "deployments", "downloads", "events", "forks",
            "git_commits", "git_refs", "git_tags", "hooks", "issue_comment", "issue_events",
            "issues", "keys", "labels", "languages", "merges", "milestones", "notifications",
            "pulls", "releases", "stargazers", "statuses", "subscribers", "subscription", "tags",
            "teams", "trees")}
        return urls | {
            "id": zlib.crc32(full_name.encode()) % 10_000_000, "node_id": f"R_{full_name}",
            "name": name, "full_name": full_name, "owner": self._simple_user(owner),
            "private": False, "html_url": f"https://github.test/{full_name}",
            "description": None, "fork": False, "url": api,
            "clone_url": f"https://github.test/{full_name}.git",
            "git_url": f"git://github.test/{full_name}.git",
            "ssh_url": f"git@github.test:{full_name}.git",
            "svn_url": f"https://github.test/{full_name}", "mirror_url": None,
            "homepage": None, "language": "Python", "forks": 0, "forks_count": 0,
            "stargazers_count": 0, "watchers": 0, "watchers_count": 0, "size": 1,
            "default_branch": "main", "open_issues": 0, "open_issues_count": 0,
            "has_issues": True, "has_projects": False, "has_wiki": False, "has_pages": False,
            "has_downloads": True, "archived": False, "disabled": False, "license": None,
            "pushed_at": when, "created_at": when, "updated_at": when,
        }

    def _pull_json(self, pull: _Pull) -> dict:
        api = f"{self.url}/repos/{pull.repository}"
        html = f"https://github.test/{pull.repository}/pull/{pull.number}"
        when = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
        links = {"self": f"{api}/pulls/{pull.number}", "html": html,
                 "issue": f"{api}/issues/{pull.number}",
                 "comments": f"{api}/issues/{pull.number}/comments",
                 "review_comments": f"{api}/pulls/{pull.number}/comments",
                 "review_comment": f"{api}/pulls/comments{{/number}}",
                 "commits": f"{api}/pulls/{pull.number}/commits",
                 "statuses": f"{api}/statuses/{pull.head_sha}"}
        side = {"user": self._simple_user(pull.head_repository.split("/")[0])}
        return {
            "url": links["self"], "id": pull.number + 5_000_000, "node_id": f"PR_{pull.number}",
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": links["issue"], "commits_url": links["commits"],
            "review_comments_url": links["review_comments"],
            "review_comment_url": links["review_comment"], "comments_url": links["comments"],
            "statuses_url": links["statuses"], "number": pull.number, "state": "open",
            "locked": False, "title": f"PR {pull.number}", "user": self._simple_user(pull.author),
            "body": None, "labels": [], "milestone": None, "created_at": when,
            "updated_at": when, "closed_at": None, "merged_at": None, "merge_commit_sha": None,
            "assignee": None, "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": side | {"label": f"{pull.head_repository.split('/')[0]}:feature",
                            "ref": "feature", "sha": pull.head_sha,
                            "repo": self._repository_json(pull.head_repository)},
            "base": {"label": f"{pull.repository.split('/')[0]}:main", "ref": "main",
                     "sha": "0" * 40, "user": self._simple_user(pull.repository.split("/")[0]),
                     "repo": self._repository_json(pull.repository)},
            "_links": {name: {"href": href} for name, href in links.items()},
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": False,
        }


_SEGMENT = r"([^/]+)"
_ROUTES: list[tuple[str, str, Callable[..., tuple[int, dict[str, str], object]]]] = [
    ("GET", r"/user", FakeGitHub._get_user),
    ("GET", rf"/repos/{_SEGMENT}/{_SEGMENT}/issues/(\d+)/comments", FakeGitHub._list_comments),
    ("POST", rf"/repos/{_SEGMENT}/{_SEGMENT}/issues/(\d+)/comments", FakeGitHub._create),
    ("PATCH", rf"/repos/{_SEGMENT}/{_SEGMENT}/issues/comments/(\d+)", FakeGitHub._update),
    ("GET", rf"/repos/{_SEGMENT}/{_SEGMENT}/commits/{_SEGMENT}/pulls",
     FakeGitHub._pulls_for_commit),
]


def _refuse_write(exchange: Exchange, token: Token) -> tuple[int, dict, object] | None:
    if not token.can_write:
        return 403, {}, _error_body(NOT_ACCESSIBLE)
    body = exchange.body
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return 422, {}, _validation_error("body", "missing_field")
    if len(body["body"]) > BODY_LIMIT:
        return 422, {}, _validation_error("body", "custom",
                                          f"Body is too long (maximum is {BODY_LIMIT} characters)")
    return None


def _error_body(message: str) -> dict:
    return {"message": message, "documentation_url": DOCS}


def _validation_error(field_name: str, code: str, message: str | None = None) -> dict:
    error = {"resource": "IssueComment", "code": code, "field": field_name}
    if message:
        error["message"] = message
    return {"message": "Validation Failed", "errors": [error], "documentation_url": DOCS}


def _bearer(headers: dict[str, str]) -> str:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() in ("bearer", "token") else ""


def _handler_for(github: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve()

        do_POST = do_PATCH = do_DELETE = do_PUT = do_GET

        def _serve(self) -> None:
            exchange = self._record()
            status, headers, body = github.handle(exchange)
            exchange.status, exchange.response_headers = status, headers
            exchange.response_body = body
            self._answer(status, headers, body)

        def _record(self) -> Exchange:
            parts = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length", "0") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            exchange = Exchange(self.command, parts.path, urllib.parse.parse_qs(parts.query),
                                {k.lower(): v for k, v in self.headers.items()}, body)
            with github._lock:
                github.exchanges.append(exchange)
            return exchange

        def _answer(self, status: int, headers: dict[str, str], body: object) -> None:
            raw = body.encode() if isinstance(body, str) else (
                b"" if body is None else json.dumps(body).encode())
            headers = {"Content-Type": "application/json; charset=utf-8"} | headers
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a slow-answer fault): nothing to do

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean; `exchanges` is the record

    return Handler
