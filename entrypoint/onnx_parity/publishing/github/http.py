"""A small GitHub REST client: timeouts, bounded retries, rate limits, pagination.

Built on requests: each client has one `requests.Session`, whose adapter hands urllib3 a
`Retry` that knows GitHub's rules (`retry.py`), so urllib3 does the repeating and the counting,
and the client handles what urllib3 hands back. The rules:

- every request carries a timeout (`RetryPolicy.timeout_seconds`, applied to the connect and
  to each read);
- 5xx answers, connection errors and timeouts are retried up to `attempts` times in all,
  waiting `backoff_seconds * 2**k` (1, 2, 4, 8 s) in between. urllib3 repeats GET and PATCH
  (and the other methods in `REPEATABLE_METHODS`) itself. A POST is never sent again blindly:
  GitHub may have acted on it, so the client waits the same backoff and the caller's
  `before_retry` decides (without one, the POST fails at once);
- rate limits (403/429 with `x-ratelimit-remaining: 0` -> wait until `x-ratelimit-reset` by
  the client's clock; 403/429 with `retry-after` -> wait that long; other 429s or 403s whose
  message says "rate limit" -> wait 60 s) are waited out, whatever the method;
- all waiting of one client together stays under `max_total_wait_seconds`; a wait that would
  cross it is not started, the request fails instead;
- any other 4xx fails at once: repeating a refused request cannot change the answer.

Every wait goes through the injected `sleep`; `requests_sent` counts every request sent.
The token goes into the Authorization header and nowhere else: error texts are built from the
method, the path and GitHub's own message, and are scrubbed of the token all the same.
requests drops the header on a redirect to another host; pagination refuses such links.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from requests.auth import AuthBase
from requests.utils import parse_header_links
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as NoAnswerInTime

from onnx_parity.errors import OnnxParityError
from onnx_parity.publishing.github.retry import (
    REPEATABLE_METHODS,
    SECONDARY_LIMIT_WAIT_SECONDS,
    Ledger,
    RetryingAdapter,
    RetryPolicy,
    backoff_seconds,
    rate_limit_wait,
)

__all__ = ["BeforeRetry", "GitHubClient", "GitHubError", "Response", "RetryPolicy"]

LOG = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
DEFAULT_POLICY = RetryPolicy()
PER_PAGE = 100


class GitHubError(OnnxParityError):
    """A GitHub API request failed for good (after any retries the rules allow).

    `status` is the final HTTP status, or None when no answer came (timeout, connection).
    `api_message` is GitHub's `message` field ("" when there was none). `kind` is one of
    "refused" (a 4xx that is not retried), "rate-limited" (the wait budget ran out),
    "unavailable" (5xx, timeouts or connection errors on every attempt).
    """

    def __init__(self, text: str, status: int | None, api_message: str, kind: str) -> None:
        super().__init__(text)
        self.status = status
        self.api_message = api_message
        self.kind = kind


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: Any  # parsed JSON, or None for an empty or non-JSON body

    @property
    def api_message(self) -> str:
        return str(self.body.get("message", "")) if isinstance(self.body, dict) else ""


@dataclass(frozen=True)
class _NoAnswer:
    """A request that got no HTTP answer: timeout or connection error."""

    reason: str


# Called after a transient failure and its backoff, before the request is sent again; a
# Response it returns ends the retrying (see `GitHubClient.request`).
BeforeRetry = Callable[[], "Response | None"]


class _BearerToken(AuthBase):
    """The token as session auth: with an auth set, requests never lets ~/.netrc replace it."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._token = token
        self.policy = policy
        self._ledger = Ledger(policy, sleep, clock)
        self._session = _session(token, self._ledger)

    @property
    def waited_seconds(self) -> float:
        """All backoff and rate-limit waiting so far."""
        return self._ledger.waited

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent so far, retries included."""
        return self._ledger.sent

    def request(
        self,
        method: str,
        path: str,
        body: object | None = None,
        *,
        before_retry: BeforeRetry | None = None,
    ) -> Response:
        """Send one API request, retrying as the module rules say; raise GitHubError at the end.

        `before_retry` is for requests that are not idempotent (POST): GitHub can act on a
        request and still answer 5xx or time out, so the caller looks whether it took effect
        and returns a Response to stop, or None to send the request again.
        """
        failures = 0
        while True:
            answer = self._exchange(method, path, body)
            if isinstance(answer, Response) and answer.status < 400:
                return answer
            if isinstance(answer, Response) and answer.status < 500:
                self._settle_refusal(method, path, answer)  # raises unless it waited a limit out
                continue
            # urllib3's count; at least 1 for a failure it never saw (reading the body).
            failures += max(self._ledger.failures, 1)
            if method in REPEATABLE_METHODS or failures >= self.policy.attempts:
                raise self._error(method, path, answer, "unavailable", failures)
            if before_retry is None:
                raise self._error(method, path, answer, "unavailable", failures,
                                  "; not sent again, as GitHub may have acted on it")
            self._backoff(method, path, answer, failures)
            settled = before_retry()
            if settled is not None:
                return settled

    def paginate(self, path: str) -> Iterator[Any]:
        """Yield every item of a list endpoint, page by page (100 a page), to the last page."""
        next_path: str | None = _with_query(path, per_page=str(PER_PAGE))
        while next_path is not None:
            page = self.request("GET", next_path)
            if not isinstance(page.body, list):
                raise GitHubError(
                    self._scrub(f"GET {_path_only(next_path)}: expected a JSON list, got "
                                f"{type(page.body).__name__}"), page.status, "", "refused")
            yield from page.body
            next_path = self._next_link(page.headers.get("link", ""))

    # -- one exchange (urllib3 repeats inside it as `GitHubRetry` says) -----------------

    def _exchange(self, method: str, path: str, body: object | None) -> Response | _NoAnswer:
        seconds = self.policy.timeout_seconds
        try:
            answer = self._session.request(method, self._url(path), json=body,
                                           timeout=(seconds, seconds))
        except requests.RequestException as error:
            return _NoAnswer(self._no_answer_reason(error))
        return _response(answer)

    def _no_answer_reason(self, error: requests.RequestException) -> str:
        cause = _root_cause(error)
        if isinstance(cause, NoAnswerInTime) and not isinstance(cause, NewConnectionError):
            return f"no answer within {self.policy.timeout_seconds:g} s (timeout)"
        return f"connection failed ({type(cause).__name__}: {cause})"

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return f"{self._api_url}/{path.lstrip('/')}"

    def _next_link(self, link_header: str) -> str | None:
        """The rel="next" URL, only if it points at our API: the token must not go elsewhere."""
        target = _link_next(link_header)
        if target is None:
            return None
        ours, theirs = urllib.parse.urlsplit(self._api_url), urllib.parse.urlsplit(target)
        if (ours.scheme, ours.netloc) != (theirs.scheme, theirs.netloc):
            raise GitHubError(
                f"GitHub's Link header points outside {ours.scheme}://{ours.netloc} "
                f"({theirs.scheme}://{theirs.netloc}); refusing to send the token there.",
                None, "", "refused")
        return target

    # -- what urllib3 handed back ------------------------------------------------------

    def _settle_refusal(self, method: str, path: str, answer: Response) -> None:
        """Raise for a 4xx, unless it is a rate limit named only in the body: wait that out."""
        asked = rate_limit_wait(answer.status, answer.headers, self._ledger.clock())
        if asked is not None:  # urllib3 saw this limit and stopped: the wait crosses the bound
            raise self._rate_limited(method, path, answer, asked)
        if answer.status != 403 or "rate limit" not in answer.api_message.lower():
            raise self._error(method, path, answer, "refused")
        # urllib3 reads headers, not bodies: a secondary limit that GitHub names only in its
        # JSON message is waited out here, from the same budget.
        if not self._ledger.fits(SECONDARY_LIMIT_WAIT_SECONDS):
            raise self._rate_limited(method, path, answer, SECONDARY_LIMIT_WAIT_SECONDS)
        LOG.info("%s %s: rate-limited (403); waiting %.0f s", method, _path_only(path),
                 SECONDARY_LIMIT_WAIT_SECONDS)
        self._ledger.wait(SECONDARY_LIMIT_WAIT_SECONDS)

    def _backoff(self, method: str, path: str, answer: Response | _NoAnswer, failures: int) -> None:
        seconds = backoff_seconds(self.policy.backoff_seconds, failures)
        if not self._ledger.fits(seconds):
            raise self._error(method, path, answer, "unavailable", failures)
        LOG.info("%s %s: %s; checking and retrying in %g s (attempt %d of %d)", method,
                 _path_only(path), _describe(answer), seconds, failures + 1, self.policy.attempts)
        self._ledger.wait(seconds)

    # -- errors ----------------------------------------------------------------------

    def _rate_limited(self, method: str, path: str, answer: Response,
                      seconds: float) -> GitHubError:
        return GitHubError(self._scrub(
            f"{method} {_path_only(path)}: GitHub's rate limit asks to wait {seconds:.0f} s, "
            f"which would exceed the {self.policy.max_total_wait_seconds:g} s bound on "
            f"waiting ({self._ledger.waited:.0f} s spent already); gave up. "
            f"GitHub said: {answer.status} {answer.api_message or '(no message)'}"),
            answer.status, self._scrub(answer.api_message), "rate-limited")

    def _error(self, method: str, path: str, answer: Response | _NoAnswer, kind: str,
               attempts: int = 1, note: str = "") -> GitHubError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        text = f"{method} {_path_only(path)} failed{tries}: {_describe(answer)}{note}"
        status = answer.status if isinstance(answer, Response) else None
        message = answer.api_message if isinstance(answer, Response) else ""
        return GitHubError(self._scrub(text), status, self._scrub(message), kind)

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text


def _session(token: str, ledger: Ledger) -> requests.Session:
    session = requests.Session()
    session.auth = _BearerToken(token)
    session.headers.update({"Accept": "application/vnd.github+json",
                            "X-GitHub-Api-Version": API_VERSION, "User-Agent": "onnx-parity"})
    adapter = RetryingAdapter(ledger)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def _response(answer: requests.Response) -> Response:
    headers = {name.lower(): value for name, value in answer.headers.items()}
    try:
        body = answer.json() if answer.content.strip() else None
    except ValueError:
        body = None  # e.g. the HTML page of a 502 from GitHub's front end
    return Response(answer.status_code, headers, body)


def _root_cause(error: requests.RequestException) -> object:
    """urllib3's error under requests' wrapping; under a MaxRetryError, the last one it saw."""
    cause = error.args[0] if error.args and isinstance(error.args[0], Exception) else error
    return getattr(cause, "reason", cause)


def _describe(answer: Response | _NoAnswer) -> str:
    if isinstance(answer, _NoAnswer):
        return answer.reason
    return f"GitHub answered {answer.status} {answer.api_message or '(no message)'}"


def _path_only(path: str) -> str:
    """The path of a URL without scheme, host or query, for messages."""
    return urllib.parse.urlsplit(path).path or path


def _with_query(path: str, **params: str) -> str:
    parts = urllib.parse.urlsplit(path)
    query = dict(urllib.parse.parse_qsl(parts.query))
    for name, value in params.items():
        query.setdefault(name, value)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _link_next(link_header: str) -> str | None:
    """The target of rel="next" in an RFC 8288 Link header, as GitHub writes it."""
    links = parse_header_links(link_header) if link_header.strip() else []
    return next((link["url"] for link in links if link.get("rel") == "next"), None)
