"""A small GitHub REST client: timeouts, bounded retries, rate limits, pagination.

Stdlib only (urllib), so the action image needs no HTTP library. The rules:

- every request carries a timeout (`RetryPolicy.timeout_seconds`, applied to the connect and
  to each read);
- 5xx answers, connection errors and timeouts are retried up to `attempts` times in all,
  waiting `backoff_seconds * 2**k` (1, 2, 4, 8 s) in between;
- rate limits (403/429 with `x-ratelimit-remaining: 0` -> wait until `x-ratelimit-reset`;
  403/429 with `retry-after` -> wait that long; other 429s or 403s that say "rate limit" ->
  wait 60 s) are waited out;
- all waiting of one client together stays under `max_total_wait_seconds`; a wait that would
  cross it is not started, the request fails instead;
- any other 4xx fails at once: repeating a refused request cannot change the answer.

The token goes into the Authorization header and nowhere else: error texts are built from the
method, the path and GitHub's own message, and are scrubbed of the token all the same.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
PER_PAGE = 100
# GitHub's advice for a secondary rate limit that names no wait: at least a minute.
SECONDARY_LIMIT_WAIT_SECONDS = 60.0
# x-ratelimit-reset has one-second resolution; never wait less than this for a limit.
MIN_RATE_LIMIT_WAIT_SECONDS = 1.0


class GitHubError(Exception):
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
class RetryPolicy:
    timeout_seconds: float = 30.0
    attempts: int = 5
    backoff_seconds: float = 1.0
    max_total_wait_seconds: float = 120.0


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: object  # parsed JSON, or None for an empty or non-JSON body

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


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._token = token
        self.policy = policy
        self._sleep = sleep
        self._clock = clock
        self.waited_seconds = 0.0  # all backoff and rate-limit waiting so far
        self.requests_sent = 0  # HTTP requests sent so far, retries included

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
            answer = self._send(method, path, body)
            if isinstance(answer, Response) and answer.status < 400:
                return answer
            if isinstance(answer, Response) and _rate_limit_wait(answer, self._clock()) is not None:
                self._wait_for_rate_limit(method, path, answer)
                continue
            if isinstance(answer, Response) and answer.status < 500:
                raise self._error(method, path, answer, "refused")
            failures += 1
            if failures >= self.policy.attempts:
                raise self._error(method, path, answer, "unavailable", failures)
            self._backoff(method, path, answer, failures)
            settled = before_retry() if before_retry else None
            if settled is not None:
                return settled

    def paginate(self, path: str) -> Iterator[object]:
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

    # -- one HTTP exchange -------------------------------------------------------------

    def _send(self, method: str, path: str, body: object | None) -> Response | _NoAnswer:
        request = urllib.request.Request(
            self._url(path), method=method, headers=self._headers(body is not None),
            data=None if body is None else json.dumps(body).encode("utf-8"))
        self.requests_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.policy.timeout_seconds) as answer:
                return _response(answer.status, answer.headers.items(), answer.read())
        except urllib.error.HTTPError as answer:
            with answer:
                return _response(answer.code, answer.headers.items(), answer.read())
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            return _NoAnswer(self._no_answer_reason(error))

    def _no_answer_reason(self, error: Exception) -> str:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            return f"no answer within {self.policy.timeout_seconds:g} s (timeout)"
        return f"connection failed ({type(reason).__name__}: {reason})"

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return f"{self._api_url}/{path.lstrip('/')}"

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "onnx-parity",
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

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

    # -- waiting ---------------------------------------------------------------------

    def _backoff(self, method: str, path: str, answer: Response | _NoAnswer, failures: int) -> None:
        seconds = self.policy.backoff_seconds * 2 ** (failures - 1)
        if not self._within_budget(seconds):
            raise self._error(method, path, answer, "unavailable", failures)
        LOG.info("%s %s: %s; retrying in %g s (attempt %d of %d)", method, _path_only(path),
                 _describe(answer), seconds, failures + 1, self.policy.attempts)
        self._wait(seconds)

    def _wait_for_rate_limit(self, method: str, path: str, answer: Response) -> None:
        seconds = _rate_limit_wait(answer, self._clock()) or 0.0
        if not self._within_budget(seconds):
            raise GitHubError(self._scrub(
                f"{method} {_path_only(path)}: GitHub's rate limit asks to wait {seconds:.0f} s, "
                f"which would exceed the {self.policy.max_total_wait_seconds:g} s bound on "
                f"waiting ({self.waited_seconds:.0f} s spent already); gave up. "
                f"GitHub said: {answer.status} {answer.api_message or '(no message)'}"),
                answer.status, answer.api_message, "rate-limited")
        LOG.info("%s %s: rate-limited (%d); waiting %.0f s", method, _path_only(path),
                 answer.status, seconds)
        self._wait(seconds)

    def _within_budget(self, seconds: float) -> bool:
        return self.waited_seconds + seconds <= self.policy.max_total_wait_seconds

    def _wait(self, seconds: float) -> None:
        self.waited_seconds += seconds
        self._sleep(seconds)

    # -- errors ----------------------------------------------------------------------

    def _error(self, method: str, path: str, answer: Response | _NoAnswer, kind: str,
               attempts: int = 1) -> GitHubError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        text = f"{method} {_path_only(path)} failed{tries}: {_describe(answer)}"
        status = answer.status if isinstance(answer, Response) else None
        message = answer.api_message if isinstance(answer, Response) else ""
        return GitHubError(self._scrub(text), status, self._scrub(message), kind)

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text


def _response(status: int, headers: object, raw: bytes) -> Response:
    lowered = {name.lower(): value for name, value in headers}  # type: ignore[attr-defined]
    try:
        body = json.loads(raw) if raw.strip() else None
    except ValueError:
        body = None  # e.g. the HTML page of a 502 from GitHub's front end
    return Response(status, lowered, body)


def _rate_limit_wait(answer: Response, now: float) -> float | None:
    """Seconds to wait if `answer` is a rate-limit answer, else None."""
    if answer.status not in (403, 429):
        return None
    retry_after = answer.headers.get("retry-after", "").strip()
    if retry_after.isdigit():
        return max(float(retry_after), MIN_RATE_LIMIT_WAIT_SECONDS)
    reset = answer.headers.get("x-ratelimit-reset", "").strip()
    if answer.headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(float(reset) - now, MIN_RATE_LIMIT_WAIT_SECONDS)
    if answer.status == 429 or "rate limit" in answer.api_message.lower():
        return SECONDARY_LIMIT_WAIT_SECONDS
    return None


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
    for part in link_header.split(","):
        target, _, params = part.partition(";")
        rels = [p.strip() for p in params.split(";")]
        if 'rel="next"' in rels or "rel=next" in rels:
            return target.strip().strip("<>")
    return None
