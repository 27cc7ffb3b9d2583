"""When a model request that failed before its answer started is sent again, and after how long.

The rules OpenAI-compatible servers expect from a client: a transport failure, 408 (request timeout),
409 (lock), 429 (rate limit) and any 5xx are worth another try; other statuses are the caller's fault.
A server may decide (`x-should-retry`) or say how long to wait (`retry-after-ms`, `retry-after` in
seconds or as an HTTP date); a wait longer than `MAX_SERVER_DELAY_S` is not honoured by retrying.
Otherwise the wait doubles from 0.5 s up to 8 s, shortened by up to a quarter at random so that many
clients refused together do not come back together.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Final

from tenacity import RetryCallState

MAX_SERVER_DELAY_S: Final = 60.0
FIRST_DELAY_S: Final = 0.5
LONGEST_DELAY_S: Final = 8.0
_RETRIED_STATUSES: Final = frozenset({408, 409, 429})


class ServerRefusal(Exception):
    """A non-2xx answer to a model request: its status, the server's message, whether to retry and when."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status = status
        self.message = message
        self.retryable = should_retry(status, headers)
        self.server_delay_s = server_delay_s(headers)


def server_delay_s(headers: Mapping[str, str]) -> float | None:
    """The wait the server asked for in seconds, or None when it named none (or named it unreadably)."""
    for name, per_second in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / per_second
        except ValueError:
            pass
    date = headers.get("retry-after")
    if date is None:
        return None
    try:
        return parsedate_to_datetime(date).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    delay = server_delay_s(headers)
    if delay is not None and delay > MAX_SERVER_DELAY_S:
        return False
    decided = headers.get("x-should-retry")
    if decided in ("true", "false"):
        return decided == "true"
    return status in _RETRIED_STATUSES or status >= 500


def backoff_s(attempts_made: int, server_delay: float | None) -> float:
    """The wait before the next attempt, after `attempts_made` (1, 2, ...) failed ones."""
    if server_delay is not None and math.isfinite(server_delay) and 0 < server_delay <= MAX_SERVER_DELAY_S:
        return server_delay
    doubled = min(FIRST_DELAY_S * 2.0 ** min(attempts_made - 1, 32), LONGEST_DELAY_S)
    return doubled * (1 - 0.25 * random.random())


def tenacity_wait(state: RetryCallState) -> float:
    """`backoff_s` as a tenacity wait strategy: the failed attempt's exception carries the server's wish."""
    error = state.outcome.exception() if state.outcome is not None else None
    server_delay = error.server_delay_s if isinstance(error, ServerRefusal) else None
    return backoff_s(state.attempt_number, server_delay)
