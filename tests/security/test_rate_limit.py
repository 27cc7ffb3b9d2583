"""The per-user rate limiter: token-bucket arithmetic on a fake clock, who counts as a caller, the 429 it
answers in each API's error shape, and, over real HTTP, one user's burst leaving another user untouched."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from backend.server import auth
from backend.server.config import ServerConfig
from backend.server.rate_limit import RateLimit, TokenBuckets, caller_of, is_limited, retry_after_header
from tests.support.live_server import live_server, make_settings


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_is_allowed_then_refused_with_the_wait_for_one_token() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(per_minute=120, burst=3, clock=clock)  # 2 tokens a second
    assert [buckets.take("alice") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("alice") == pytest.approx(0.5)
    clock.now += 0.2  # 0.4 of a token back
    assert buckets.take("alice") == pytest.approx(0.3)
    clock.now += 0.3
    assert buckets.take("alice") == 0.0
    assert buckets.take("alice") == pytest.approx(0.5)


def test_refill_stops_at_the_burst() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(per_minute=60, burst=2, clock=clock)
    buckets.take("alice")
    clock.now += 3600  # an hour idle refills at most `burst` tokens
    assert [buckets.take("alice") for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]


def test_callers_have_their_own_buckets() -> None:
    buckets = TokenBuckets(per_minute=60, burst=1, clock=FakeClock())
    assert buckets.take("alice") == 0.0
    assert buckets.take("alice") > 0
    assert buckets.take("bob") == 0.0


def test_buckets_idle_long_enough_to_be_full_are_forgotten() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(per_minute=60, burst=2, clock=clock)  # empty → full in 2 s
    buckets.take("alice")
    clock.now += 1.0
    buckets.take("bob")
    assert len(buckets) == 2
    clock.now += 1.5  # alice idle 2.5 s (full again), bob 1.5 s (not yet)
    buckets.take("carol")
    assert len(buckets) == 2
    # Forgetting alice changed nothing: she has her whole burst.
    assert [buckets.take("alice"), buckets.take("alice")] == [0.0, 0.0]


def test_at_most_max_callers_are_kept_least_recently_used_first() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(per_minute=60, burst=1, clock=clock, max_callers=2)
    for caller in ("a", "b", "a", "c"):
        buckets.take(caller)
    assert len(buckets) == 2
    assert buckets.take("a") > 0  # kept: used after b
    assert buckets.take("b") == 0.0  # b was dropped, so it starts full


@pytest.mark.parametrize(("per_minute", "burst"), [(0, 1), (1, 0), (-5, 3)])
def test_a_limit_below_one_is_refused(per_minute: int, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBuckets(per_minute=per_minute, burst=burst)


@pytest.mark.parametrize(("wait", "header"), [(0.01, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_rounded_up(wait: float, header: str) -> None:
    assert retry_after_header(wait) == header


@pytest.mark.parametrize(
    ("path", "limited"),
    [
        ("/api/v1/chat", True),
        ("/api/v1/kbs/orchard/documents", True),
        ("/v1/chat/completions", True),
        ("/health", False),
        ("/ready", False),
        ("/", False),
        ("/ui/app.js", False),
        ("/openapi.json", False),
        ("/v1", False),
    ],
)
def test_only_the_api_is_limited(path: str, limited: bool) -> None:
    assert is_limited(path) is limited


KEYED = ServerConfig(api_keys={"key-a1": "alice", "key-a2": "alice", "key-b": "bob"}, rate_limit_per_minute=60)


def scope_with(headers: dict[str, str], client: tuple[str, int] = ("10.1.2.3", 5555)) -> Scope:
    return {
        "type": "http",
        "path": "/api/v1/chat",
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
        "client": client,
    }


def test_the_caller_is_the_keys_user_or_else_the_client_address() -> None:
    assert caller_of(scope_with({"Authorization": "Bearer key-a1"}), KEYED) == "user:alice"
    assert caller_of(scope_with({"X-API-Key": "key-a2"}), KEYED) == "user:alice"  # one user, one bucket
    assert caller_of(scope_with({"X-API-Key": "key-b"}), KEYED) == "user:bob"
    assert caller_of(scope_with({"Authorization": "Bearer guess"}), KEYED) == "client:10.1.2.3"
    assert caller_of(scope_with({}), KEYED) == "client:10.1.2.3"
    development = ServerConfig(auth_mode="none", rate_limit_per_minute=60)
    # A claimed user id proves nothing, so development mode counts per address.
    assert caller_of(scope_with({"X-API-Key": "key-b"}, ("127.0.0.1", 1)), development) == "client:127.0.0.1"


async def reached_app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"reached"})


async def test_the_middleware_answers_429_in_the_error_shape_of_the_path() -> None:
    clock = FakeClock()
    config = ServerConfig(api_keys={"key-a1": "alice"}, rate_limit_per_minute=30, rate_limit_burst=1)
    limited = RateLimit(reached_app, config, clock=clock)
    alice = {"Authorization": "Bearer key-a1"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://test") as http:
        assert (await http.post("/api/v1/chat", headers=alice)).text == "reached"
        rest = await http.post("/api/v1/chat", headers=alice)
        openai = await http.get("/v1/models", headers=alice)
        health = await http.get("/health", headers=alice)
        clock.now += 2.0  # 30 a minute: one token every 2 s
        again = await http.get("/v1/models", headers=alice)
    assert rest.status_code == 429 and rest.headers["retry-after"] == "2"
    assert rest.json()["error"]["code"] == "rate_limited" and set(rest.json()["error"]) == {"code", "message"}
    assert openai.status_code == 429
    assert openai.json()["error"]["type"] == "rate_limit_error"
    assert openai.json()["error"]["code"] == "rate_limited"
    assert health.text == "reached"
    assert again.text == "reached"


async def test_a_limited_request_is_authenticated_once_for_the_limiter_and_the_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[str] = []
    real = auth._user_for_key

    def counting(presented: str, keys: dict[str, str]) -> str | None:
        compared.append(presented)
        return real(presented, keys)

    monkeypatch.setattr(auth, "_user_for_key", counting)
    config = ServerConfig(api_keys={"key-a1": "alice"}, rate_limit_per_minute=60)

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        principal = auth.authenticate(Request(scope), config)  # what the route's dependency does
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(principal.user_id).encode()})

    limited = RateLimit(route, config)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://test") as http:
        first = await http.post("/api/v1/chat", headers={"Authorization": "Bearer key-a1"})
        second = await http.post("/api/v1/chat", headers={"Authorization": "Bearer key-a1"})

    assert first.text == second.text == "alice"
    assert compared == ["key-a1", "key-a1"]  # once per request: the route reused the limiter's answer


# --- over real HTTP

KEYS = {"alice": "rate-key-alice-0123456789", "bob": "rate-key-bob-0123456789"}


def as_user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


async def test_a_users_burst_over_the_limit_is_429_until_a_token_is_back(data_dir: Path) -> None:
    settings = make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS=",".join(f"{key}={user}" for user, key in KEYS.items()),
        RATE_LIMIT_PER_MINUTE=60,
        RATE_LIMIT_BURST=3,
    )
    session = "rl-" + uuid.uuid4().hex[:8]
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=20) as http:
            allowed = [await http.post("/api/v1/clear", json={"session_id": session}, headers=as_user("alice"))]
            allowed.append(await http.get("/api/v1/kbs", headers=as_user("alice")))
            allowed.append(await http.get("/v1/models", headers=as_user("alice")))
            chat = await http.post(
                "/api/v1/chat",
                json={"session_id": session, "message": "hello", "kb_prefix": "general"},
                headers=as_user("alice"),
            )
            completions = await http.post(
                "/v1/chat/completions",
                json={"model": "general", "messages": [{"role": "user", "content": "hi"}]},
                headers=as_user("alice"),
            )
            bob = await http.get("/api/v1/kbs", headers=as_user("bob"))
            health = await http.get("/health")
            await asyncio.sleep(int(chat.headers["retry-after"]))
            later = await http.get(f"/api/v1/conversations/{session}/messages", headers=as_user("alice"))
    assert [response.status_code for response in allowed] == [200, 200, 200]
    assert chat.status_code == 429, chat.text
    assert chat.json()["error"]["code"] == "rate_limited"
    assert chat.headers["retry-after"] == "1"
    assert completions.status_code == 429 and completions.json()["error"]["type"] == "rate_limit_error"
    assert bob.status_code == 200  # another user is unaffected
    assert health.status_code == 200
    # Allowed again, and the refused chat stored nothing.
    assert later.status_code == 404 and later.json()["error"]["code"] == "not_found"


def test_the_limit_is_on_by_default_only_with_api_keys(tmp_path: Path) -> None:
    from backend.main import server_config

    keyed = server_config(make_settings(tmp_path, AUTH_MODE="api_key", API_KEYS="k=alice"))
    development = server_config(make_settings(tmp_path))
    chosen = server_config(make_settings(tmp_path, RATE_LIMIT_PER_MINUTE=30, RATE_LIMIT_BURST=5))
    off = server_config(make_settings(tmp_path, AUTH_MODE="api_key", API_KEYS="k=alice", RATE_LIMIT_PER_MINUTE=0))
    assert (keyed.rate_limit_per_minute, keyed.rate_limit_burst) == (120, 20)
    assert development.rate_limit_per_minute == 0
    assert (chosen.rate_limit_per_minute, chosen.rate_limit_burst) == (30, 5)
    assert off.rate_limit_per_minute == 0
