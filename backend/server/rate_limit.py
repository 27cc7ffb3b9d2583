"""Per-user rate limiting: a token bucket per caller, answered with 429 and `Retry-After` when empty.

Each caller has a bucket of `burst` tokens that refills at `per_minute / 60` tokens a second; a request takes
one token. The caller is the authenticated user (API-key mode); a request whose credentials are missing or
wrong counts against its client address (it gets a 401 anyway, but key guessing is slowed), and so does every
request in development mode, where a claimed user id proves nothing.

State lives in the middleware instance, so it is per app and per process (documented: N processes allow
N times the rate). Memory is bounded: a bucket that has been idle long enough to be full again is the same as
no bucket and is dropped, and at most `max_callers` buckets are kept (least recently used go first).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.domain.errors import Unauthenticated
from backend.server.auth import authenticate
from backend.server.config import ServerConfig
from backend.server.errors import error_response

Clock = Callable[[], float]
MAX_CALLERS = 100_000
# The API; probes (/health, /ready), the web page (/, /ui/) and the API description (/docs, /openapi.json) are free.
LIMITED_PREFIXES = ("/api/", "/v1/")


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """Token buckets keyed by caller. Not thread-safe: it is used from one event loop and never awaits."""

    def __init__(
        self, per_minute: int, burst: int, clock: Clock = time.monotonic, max_callers: int = MAX_CALLERS
    ) -> None:
        if per_minute < 1 or burst < 1 or max_callers < 1:
            raise ValueError("per_minute, burst and max_callers must be at least 1")
        self._rate = per_minute / 60.0  # tokens per second
        self._burst = float(burst)
        self._clock = clock
        self._max_callers = max_callers
        self._refill_s = self._burst / self._rate  # an empty bucket is full again after this long
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, caller: str) -> float:
        """Take a token for `caller`: 0.0 when allowed, else the seconds until a token is available."""
        now = self._clock()
        bucket = self._buckets.pop(caller, None)
        if bucket is None:
            bucket = _Bucket(self._burst, now)
        else:
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            bucket.updated = now
        self._buckets[caller] = bucket  # most recently used: the end of the order
        self._evict(now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self._rate

    def _evict(self, now: float) -> None:
        # The front is the least recently used: once it is not idle-and-full, none behind it is.
        while self._buckets:
            caller, oldest = next(iter(self._buckets.items()))
            if len(self._buckets) <= self._max_callers and now - oldest.updated < self._refill_s:
                return
            del self._buckets[caller]


def is_limited(path: str) -> bool:
    return path.startswith(LIMITED_PREFIXES)


def caller_of(scope: Scope, config: ServerConfig) -> str:
    """Whom a request counts against: `user:<id>` when its API key is valid, else `client:<address>`."""
    if config.auth_enabled:
        try:
            user = authenticate(Request(scope), config).user_id
        except Unauthenticated:
            user = None
        if user is not None:
            return f"user:{user}"
    client = scope.get("client")
    return f"client:{client[0] if client else 'unknown'}"


def retry_after_header(wait_s: float) -> str:
    """Whole seconds, rounded up, never 0 (a client retrying at once would only be refused again)."""
    return str(max(1, math.ceil(wait_s)))


class RateLimit:
    """Pure ASGI middleware in front of the API routes."""

    def __init__(self, app: ASGIApp, config: ServerConfig, clock: Clock = time.monotonic) -> None:
        self.app = app
        self.config = config
        self.buckets = TokenBuckets(config.rate_limit_per_minute, config.rate_limit_burst, clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_limited(scope["path"]):
            await self.app(scope, receive, send)
            return
        wait_s = self.buckets.take(caller_of(scope, self.config))
        if wait_s == 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = retry_after_header(wait_s)
        response = error_response(
            scope["path"],
            429,
            "rate_limited",
            f"too many requests: at most {self.config.rate_limit_per_minute} a minute "
            f"(bursts of {self.config.rate_limit_burst}); retry after {retry_after} s",
            headers={"Retry-After": retry_after},
        )
        await response(scope, receive, send)
