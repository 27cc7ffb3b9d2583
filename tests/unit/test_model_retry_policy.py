"""retry_policy: which refused or failed model requests are sent again, and after how long."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from backend.infrastructure.llm.retry_policy import (
    FIRST_DELAY_S,
    LONGEST_DELAY_S,
    MAX_SERVER_DELAY_S,
    ServerRefusal,
    backoff_s,
    server_delay_s,
    should_retry,
)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_passing_failures_are_retried(status: int) -> None:
    assert should_retry(status, {})


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_the_callers_mistakes_are_not_retried(status: int) -> None:
    assert not should_retry(status, {})


def test_the_server_can_decide_either_way() -> None:
    assert not should_retry(503, {"x-should-retry": "false"})
    assert should_retry(400, {"x-should-retry": "true"})
    assert should_retry(503, {"x-should-retry": "maybe"})  # not a decision: the status rules


def test_a_wait_longer_than_the_limit_is_not_retried() -> None:
    assert not should_retry(429, {"retry-after": str(MAX_SERVER_DELAY_S + 1)})
    assert should_retry(429, {"retry-after": str(MAX_SERVER_DELAY_S)})


def test_server_delay_in_milliseconds_wins_over_seconds() -> None:
    assert server_delay_s({"retry-after-ms": "250", "retry-after": "9"}) == pytest.approx(0.25)
    assert server_delay_s({"retry-after": "1.5"}) == pytest.approx(1.5)


def test_server_delay_as_an_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    delay = server_delay_s({"retry-after": format_datetime(when, usegmt=True)})
    assert delay is not None and 28 < delay <= 30


def test_unreadable_or_missing_server_delay_is_none() -> None:
    assert server_delay_s({}) is None
    assert server_delay_s({"retry-after": "soon"}) is None


def test_backoff_follows_a_sane_server_delay() -> None:
    assert backoff_s(1, 2.0) == 2.0
    for unusable in (0.0, -1.0, MAX_SERVER_DELAY_S + 1, float("inf"), float("nan")):
        assert backoff_s(1, unusable) <= FIRST_DELAY_S


def test_backoff_doubles_up_to_the_longest_wait_with_jitter() -> None:
    for attempts_made, full in ((1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (40, LONGEST_DELAY_S)):
        waits = [backoff_s(attempts_made, None) for _ in range(200)]
        assert all(0.75 * full <= wait <= full for wait in waits)
        assert max(waits) - min(waits) > 0  # jittered, so refused clients do not return in step


def test_a_refusal_names_status_and_message_and_carries_the_decision() -> None:
    refusal = ServerRefusal(429, "slow down", {"retry-after-ms": "100"})

    assert str(refusal) == "HTTP 429: slow down"
    assert refusal.retryable and refusal.server_delay_s == pytest.approx(0.1)
    assert str(ServerRefusal(500, "", {})) == "HTTP 500"
