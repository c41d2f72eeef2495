"""When urllib3 sends a GitHub request again, and after how long: its `Retry` with GitHub's rules.

The rules are listed in `http.py`, whose client mounts `RetryingAdapter` on its session. Here:

- `GitHubRetry.increment` sorts each answer or error urllib3 reports: a rate limit its headers
  name is waited out for any method and costs no attempt; a 5xx, timeout or connection error
  costs one and is repeated only for `REPEATABLE_METHODS`; the rest goes back to the client.
- every wait (`get_retry_after` for rate limits, `get_backoff_time` for failures) is checked
  against the client's `Ledger` before urllib3 starts it, and `sleep` spends it through the
  client's injected sleep, so the budget is shared by all requests and tests can record waits.
- the `Ledger` travels to every Retry urllib3 derives, through `new()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.util.retry import RequestHistory, Retry

if TYPE_CHECKING:
    from types import TracebackType

    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse

LOG = logging.getLogger(__name__)

# GitHub's advice for a secondary rate limit that names no wait: at least a minute.
SECONDARY_LIMIT_WAIT_SECONDS = 60.0
# x-ratelimit-reset has one-second resolution; never wait less than this for a limit.
MIN_RATE_LIMIT_WAIT_SECONDS = 1.0
# Methods whose repetition leaves GitHub as one request would (PATCH sets the given fields).
# A repeated POST creates a second comment, so POST is not among them.
REPEATABLE_METHODS = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})
# The answers urllib3 shows `GitHubRetry.increment`: possible rate limits, and 5xx.
_STATUSES_TO_JUDGE = frozenset({403, 429, *range(500, 600)})


@dataclass(frozen=True)
class RetryPolicy:
    timeout_seconds: float = 30.0
    attempts: int = 5
    backoff_seconds: float = 1.0
    max_total_wait_seconds: float = 120.0


@dataclass
class Ledger:
    """One client's running totals, shared by all its Retry objects (state, hence not frozen).

    `failures` counts the failed attempts of the latest exchange, for the client's error text.
    """

    policy: RetryPolicy
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    sent: int = 0
    waited: float = 0.0
    failures: int = 0

    def fits(self, seconds: float) -> bool:
        return self.waited + seconds <= self.policy.max_total_wait_seconds

    def wait(self, seconds: float) -> None:
        self.waited += seconds
        self.sleep(seconds)


class GitHubRetry(Retry):
    """urllib3's Retry with GitHub's rules, spending the client's shared wait budget.

    `increment` returns the Retry for the next attempt, carrying the `wait` it checked against
    the budget, or raises MaxRetryError to stop: the last answer then goes back to the client
    as it came (`raise_on_status=False`), and an error becomes a requests exception.
    """

    def __init__(self, *args: Any, ledger: Ledger, wait: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger = ledger
        self.wait = wait

    @classmethod
    def for_ledger(cls, ledger: Ledger) -> GitHubRetry:
        return cls(total=max(ledger.policy.attempts - 1, 0), allowed_methods=None,
                   status_forcelist=_STATUSES_TO_JUDGE, raise_on_status=False,
                   backoff_factor=ledger.policy.backoff_seconds, ledger=ledger)

    def new(self, **kw: Any) -> Self:
        return super().new(ledger=self.ledger, **kw)  # `wait` belongs to one attempt: not kept

    def get_retry_after(self, response: BaseHTTPResponse) -> float | None:
        return rate_limit_wait(response.status, response.headers, self.ledger.clock())

    def get_backoff_time(self) -> float:
        failures = sum(1 for seen in self.history if seen.status is None or seen.status >= 500)
        return backoff_seconds(self.backoff_factor, failures)

    def sleep(self, _response: BaseHTTPResponse | None = None) -> None:
        # urllib3 passes the response positionally; the wait was already chosen in increment.
        self.ledger.wait(self.wait)

    def increment(self, method: str | None = None, url: str | None = None,
                  response: BaseHTTPResponse | None = None, error: Exception | None = None,
                  _pool: ConnectionPool | None = None,
                  _stacktrace: TracebackType | None = None) -> Self:
        limit = None if response is None else self.get_retry_after(response)
        if response is not None and limit is not None:  # no failure: the attempts stay as they are
            seen = RequestHistory(method, url, None, response.status, None)
            return self._repeat(limit, self.new(history=(*self.history, seen)), _pool, url)
        if response is not None and response.status < 500:
            raise _stop(_pool, url, None)  # no rate limit by its headers; the client reads the body
        self.ledger.failures += 1
        if method not in REPEATABLE_METHODS:
            raise _stop(_pool, url, error)  # GitHub may have acted on it: `before_retry` decides
        following = super().increment(method, url, response, error, _pool, _stacktrace)
        return self._repeat(following.get_backoff_time(), following, _pool, url, error)

    def _repeat(self, seconds: float, following: Self, pool: ConnectionPool | None,
                url: str | None, error: Exception | None = None) -> Self:
        if not self.ledger.fits(seconds):
            raise _stop(pool, url, error)  # a wait that would cross the bound is not started
        seen = following.history[-1]
        LOG.info("%s %s: %s; sending it again in %g s", seen.method, (url or "").split("?")[0],
                 type(seen.error).__name__ if seen.error else f"answered {seen.status}", seconds)
        self.ledger.sent += 1
        return following.new(wait=seconds)


def _stop(pool: ConnectionPool | None, url: str | None, error: Exception | None) -> MaxRetryError:
    # urllib3 itself raises it with pool=None when it has none; its hints say a pool.
    return MaxRetryError(pool, url, error or ResponseError("not repeated"))  # type: ignore[arg-type]


class RetryingAdapter(HTTPAdapter):
    """Sends through a `GitHubRetry`; counts each request it starts (the Retry counts repeats)."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(max_retries=GitHubRetry.for_ledger(ledger))
        self._ledger = ledger

    def send(self, request: requests.PreparedRequest, *args: Any,
             **kwargs: Any) -> requests.Response:
        self._ledger.sent += 1
        self._ledger.failures = 0
        return super().send(request, *args, **kwargs)


def rate_limit_wait(status: int, headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the headers of a 403/429 (or a bare 429) ask to wait; None if no rate limit."""
    if status not in (403, 429):
        return None
    retry_after = headers.get("retry-after", "").strip()
    if retry_after.isdigit():
        return max(float(retry_after), MIN_RATE_LIMIT_WAIT_SECONDS)
    reset = headers.get("x-ratelimit-reset", "").strip()
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(float(reset) - now, MIN_RATE_LIMIT_WAIT_SECONDS)
    return SECONDARY_LIMIT_WAIT_SECONDS if status == 429 else None


def backoff_seconds(backoff: float, failures: int) -> float:
    """The wait after the `failures`-th failed attempt: backoff * 2**k (1, 2, 4, 8 s)."""
    return backoff * 2.0 ** (failures - 1)
