"""The authorization matrix over real HTTP, on SQLite and on Postgres history.

- Every route needs credentials (401) except the probes, the web page and the API description; the list of
  routes comes from the app itself, so a new endpoint is checked the day it is added.
- Bob, holding Alice's session id, can never read, continue, clear or rate Alice's conversation, through any
  door: REST chat and stream, AG-UI (threadId), the OpenAI facade (X-Session-ID), history, clear, feedback. His
  turn lands in his own conversation, the model never sees Alice's words, and her history is unchanged.
- Naming another user in the body or query is refused.
- Only admins create knowledge bases, ingest or delete documents; a refused request changes nothing.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from backend.bootstrap import HISTORY_DB
from tests.e2e.test_agui import run_input
from tests.security.routes import concrete, every_route
from tests.support.live_server import LiveServer, live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import read_stream

KEYS = {"alice": "authz-alice-0123456789", "bob": "authz-bob-0123456789", "ada": "authz-ada-0123456789"}
ALICE_SECRET = "alice's secret plan for the harvest"

PUBLIC_PATHS = {"/health", "/ready", "/", "/ui/", "/ui/{name}", "/docs", "/docs-assets/{path}"}
PUBLIC_PATHS |= {"/openapi.json"}


def as_user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


@dataclass
class HistoryStore:
    """The conversation store under test, with a way to count its rows directly (not through the API)."""

    settings: dict[str, Any]
    count: Callable[[str], Awaitable[int]]


def _sqlite_counter(data_dir: Path) -> Callable[[str], Awaitable[int]]:
    async def count(table: str) -> int:
        with sqlite3.connect(data_dir / HISTORY_DB) as db:
            # The table name is one of this file's constants, never input.
            return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    return count


def _postgres_counter(dsn: str) -> Callable[[str], Awaitable[int]]:
    async def count(table: str) -> int:
        connection = await asyncpg.connect(dsn)
        try:
            return int(await connection.fetchval(f"SELECT count(*) FROM {table}"))
        finally:
            await connection.close()

    return count


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def history_store(request: pytest.FixtureRequest, data_dir: Path) -> HistoryStore:
    if request.param == "postgres":
        dsn = request.getfixturevalue("isolated_postgres_dsn")
        return HistoryStore({"CONVERSATION_STORE": "postgres", "POSTGRES_DSN": dsn}, _postgres_counter(dsn))
    return HistoryStore({"CONVERSATION_STORE": "sqlite"}, _sqlite_counter(data_dir))


def secured_settings(data_dir: Path, scripted_llm: ScriptedLLM, **overrides: Any) -> Any:
    return make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS=",".join(f"{key}={user}" for user, key in KEYS.items()),
        ADMIN_USERS="ada",
        RATE_LIMIT_PER_MINUTE=0,  # the matrix is about who, not how often
        **llm_settings(scripted_llm),
        **overrides,
    )


@pytest.fixture
def secured(data_dir: Path, scripted_llm: ScriptedLLM, history_store: HistoryStore) -> Iterator[LiveServer]:
    scripted_llm.default = Reply(tokens=["ok"])
    with live_server(secured_settings(data_dir, scripted_llm, **history_store.settings)) as running:
        yield running


@pytest.fixture
async def http(secured: LiveServer) -> Any:
    async with httpx.AsyncClient(base_url=secured.base_url, timeout=30) as client:
        yield client


# --- who may call at all


async def test_every_route_but_the_public_ones_needs_credentials(data_dir: Path, scripted_llm: ScriptedLLM) -> None:
    routes = every_route()
    assert len(routes) > 15 and ("POST", "/api/v1/chat") in routes
    answered: dict[tuple[str, str], list[int]] = {}
    with live_server(secured_settings(data_dir, scripted_llm)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as client:
            for method, path in routes:
                statuses = []
                for headers in ({}, {"Authorization": "Bearer not-a-key"}, {"X-API-Key": KEYS["alice"] + "x"}):
                    body = {} if method in ("POST", "PUT", "PATCH") else None
                    response = await client.request(method, concrete(path), json=body, headers=headers)
                    statuses.append(response.status_code)
                    if response.status_code == 401:
                        assert response.json()["error"]["code"] == "unauthenticated"
                        assert response.headers["www-authenticate"] == "Bearer"
                answered[(method, path)] = statuses
    public = {route for route, statuses in answered.items() if 401 not in statuses}
    assert {path for _, path in public} == PUBLIC_PATHS
    assert all(statuses == [401, 401, 401] for route, statuses in answered.items() if route not in public)
    assert all(max(answered[route]) < 400 for route in public), {r: answered[r] for r in public}
    assert scripted_llm.requests == []  # nothing reached the model


# --- one user, another user's conversation


async def start_alices_conversation(http: httpx.AsyncClient) -> tuple[str, list[dict[str, Any]]]:
    session = "shared-" + uuid.uuid4().hex[:8]
    response = await http.post(
        "/api/v1/chat",
        json={"session_id": session, "message": ALICE_SECRET, "kb_prefix": "general"},
        headers=as_user("alice"),
    )
    assert response.status_code == 200, response.text
    return session, await history_of(http, "alice", session)


async def history_of(http: httpx.AsyncClient, user: str, session: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v1/conversations/{session}/messages", headers=as_user(user))
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def bob_rest_chat(http: httpx.AsyncClient, session: str) -> None:
    body = {"session_id": session, "message": "bob here", "kb_prefix": "general"}
    response = await http.post("/api/v1/chat", json=body, headers=as_user("bob"))
    assert response.status_code == 200, response.text


async def bob_rest_stream(http: httpx.AsyncClient, session: str) -> None:
    body = {"session_id": session, "message": "bob here", "kb_prefix": "general"}
    capture = await read_stream(http, "/api/v1/chat/stream", body, headers=as_user("bob"))
    assert capture.status_code == 200 and capture.statuses[-1] == "done" and capture.text == "ok"


async def bob_agui(http: httpx.AsyncClient, session: str) -> None:
    body = run_input(session, "bob here", forwardedProps={"kb": "general"})
    response = await http.post("/api/v1/agui", json=body, headers=as_user("bob"))
    assert response.status_code == 200, response.text
    assert b"RUN_FINISHED" in response.content


async def bob_openai(http: httpx.AsyncClient, session: str) -> None:
    body = {"model": "general", "messages": [{"role": "user", "content": "bob here"}]}
    response = await http.post("/v1/chat/completions", json=body, headers={**as_user("bob"), "X-Session-ID": session})
    assert response.status_code == 200, response.text
    assert response.headers["x-session-id"] == session


@pytest.mark.parametrize("bobs_turn", [bob_rest_chat, bob_rest_stream, bob_agui, bob_openai])
async def test_continuing_with_another_users_session_id_is_your_own_conversation(
    http: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    bobs_turn: Callable[[httpx.AsyncClient, str], Awaitable[None]],
) -> None:
    session, alices = await start_alices_conversation(http)
    calls_before = len(scripted_llm.requests)
    await bobs_turn(http, session)
    bobs_prompts = [str(request["messages"]) for request in scripted_llm.requests[calls_before:]]
    assert bobs_prompts and not any("secret plan" in prompt for prompt in bobs_prompts)
    assert await history_of(http, "alice", session) == alices
    bobs = await history_of(http, "bob", session)
    assert [(m["role"], m["content"]) for m in bobs] == [("user", "bob here"), ("assistant", "ok")]
    assert not {m["id"] for m in bobs} & {m["id"] for m in alices}


async def test_reading_clearing_and_rating_another_users_conversation_finds_nothing(
    http: httpx.AsyncClient, history_store: HistoryStore
) -> None:
    session, alices = await start_alices_conversation(http)
    bob = as_user("bob")
    answer_id = alices[1]["id"]
    listing = f"/api/v1/conversations/{session}/messages"
    assert (await http.get(listing, headers=bob)).status_code == 404
    assert (await http.get(listing, params={"limit": 1, "before": answer_id}, headers=bob)).status_code == 404
    cleared = await http.post("/api/v1/clear", json={"session_id": session}, headers=bob)
    assert cleared.status_code == 200 and cleared.json()["cleared_messages"] == 0
    feedback_before = await history_store.count("feedback")
    for extra in ({}, {"session_id": session}):
        rated = await http.post(
            "/api/v1/feedback", json={"message_id": answer_id, "is_positive": False, **extra}, headers=bob
        )
        assert rated.status_code == 404, rated.text
        assert rated.json()["error"]["code"] == "not_found"
    assert await history_store.count("feedback") == feedback_before
    assert await history_of(http, "alice", session) == alices
    # The counter sees a real row: Alice may rate her own answer.
    own = await http.post(
        "/api/v1/feedback", json={"message_id": answer_id, "is_positive": True}, headers=as_user("alice")
    )
    assert own.status_code == 200
    assert await history_store.count("feedback") == feedback_before + 1


CLAIMS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/api/v1/chat", {"json": {"session_id": "{s}", "message": "hi", "user_id": "alice"}}),
    ("POST", "/api/v1/chat/stream", {"json": {"session_id": "{s}", "message": "hi", "user_id": "alice"}}),
    ("POST", "/api/v1/clear", {"json": {"session_id": "{s}", "user_id": "alice"}}),
    ("GET", "/api/v1/conversations/{s}/messages", {"params": {"user_id": "alice"}}),
]


@pytest.mark.parametrize(("method", "path", "request_kwargs"), CLAIMS)
async def test_naming_another_user_is_refused(
    http: httpx.AsyncClient, history_store: HistoryStore, method: str, path: str, request_kwargs: dict[str, Any]
) -> None:
    session, alices = await start_alices_conversation(http)
    messages_before = await history_store.count("messages")
    kwargs = {
        key: {k: (v.replace("{s}", session) if isinstance(v, str) else v) for k, v in value.items()}
        for key, value in request_kwargs.items()
    }
    response = await http.request(method, path.replace("{s}", session), headers=as_user("bob"), **kwargs)
    assert response.status_code == 400, response.text
    assert "credentials" in response.json()["error"]["message"]
    assert await history_store.count("messages") == messages_before
    assert await history_of(http, "alice", session) == alices


async def test_feedback_naming_another_user_is_refused(http: httpx.AsyncClient, history_store: HistoryStore) -> None:
    _, alices = await start_alices_conversation(http)
    body = {"message_id": alices[1]["id"], "is_positive": False, "user_id": "alice"}
    response = await http.post("/api/v1/feedback", json=body, headers=as_user("bob"))
    assert response.status_code == 400
    assert await history_store.count("feedback") == 0


# --- knowledge-base administration

DOCUMENT = {"title": "Cider pressing", "text": "Kingston Black apples are pressed for cider in October."}
NOTE_FILE = ("files", ("n.md", b"# Note\n\nPressing day.", "text/markdown"))


async def kb_state(http: httpx.AsyncClient) -> tuple[list[str], list[str]]:
    kbs = (await http.get("/api/v1/kbs", headers=as_user("alice"))).json()["knowledge_bases"]
    documents = (await http.get("/api/v1/kbs/orchard/documents", headers=as_user("alice"))).json()["documents"]
    return [kb["kb_prefix"] for kb in kbs], sorted(d["doc_id"] for d in documents)


ADMIN_WRITES: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/api/v1/kbs", {"json": {"kb_prefix": "notes"}}, 201),
    ("POST", "/api/v1/kbs/orchard/documents?wait=true", {"json": {"documents": [DOCUMENT]}}, 201),
    ("POST", "/api/v1/kbs/orchard/documents?wait=true", {"files": [NOTE_FILE]}, 201),
    ("DELETE", "/api/v1/kbs/orchard/documents/{doc}", {}, 204),
]


@pytest.mark.parametrize(("method", "path", "request_kwargs", "admin_status"), ADMIN_WRITES)
async def test_only_admins_change_knowledge_bases(
    http: httpx.AsyncClient, method: str, path: str, request_kwargs: dict[str, Any], admin_status: int
) -> None:
    before = await kb_state(http)
    target = path.replace("{doc}", before[1][0])
    for user in ("alice", "bob"):
        refused = await http.request(method, target, headers=as_user(user), **request_kwargs)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
    assert await kb_state(http) == before
    allowed = await http.request(method, target, headers=as_user("ada"), **request_kwargs)
    assert allowed.status_code == admin_status, allowed.text
    assert await kb_state(http) != before
