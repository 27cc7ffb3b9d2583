"""Identity (API keys, one user never reaches another's history) and history that survives restarts."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import stored_messages
from tests.support.live_server import live_server, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM

KEYS = {"ALICE": "key-alice-0123456789", "BOB": "key-bob-0123456789"}


def as_user(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def secured(data_dir: Path, scripted_llm: ScriptedLLM):  # type: ignore[no-untyped-def]
    settings = make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS=f"{KEYS['ALICE']}=alice,{KEYS['BOB']}=bob",
        LLM_BASE_URL=scripted_llm.base_url,
        LLM_MODEL="scripted-model",
    )
    with live_server(settings) as running:
        yield running


async def test_requests_without_valid_credentials_are_401(secured) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=secured.base_url) as http:
        body = {"session_id": "s1", "message": "hello"}
        missing = await http.post("/api/v1/chat", json=body)
        wrong = await http.post("/api/v1/chat", json=body, headers=as_user("not-a-key"))
        listing = await http.get("/api/v1/conversations/s1/messages", headers={"X-API-Key": "nope"})
    for response in (missing, wrong, listing):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
    assert missing.headers["www-authenticate"] == "Bearer"


async def test_one_user_can_never_read_continue_clear_or_rate_another_users_conversation(  # type: ignore[no-untyped-def]
    secured, scripted_llm: ScriptedLLM
) -> None:
    session = "shared-" + uuid.uuid4().hex[:8]
    scripted_llm.default = Reply(tokens=["ok"])
    async with httpx.AsyncClient(base_url=secured.base_url) as http:
        alice = as_user(KEYS["ALICE"])
        bob = {"X-API-Key": KEYS["BOB"]}
        first = await http.post(
            "/api/v1/chat",
            json={"session_id": session, "message": "alice's secret plan", "kb_prefix": "general"},
            headers=alice,
        )
        assert first.status_code == 200
        alice_answer = first.json()["message_id"]

        # Read: Bob asking for the same session id sees nothing of Alice's.
        assert (await http.get(f"/api/v1/conversations/{session}/messages", headers=bob)).status_code == 404
        # Claiming to be Alice in the body does not help.
        claimed = await http.get(f"/api/v1/conversations/{session}/messages", params={"user_id": "alice"}, headers=bob)
        assert claimed.status_code == 400
        # Continue: Bob's message with Alice's session id starts Bob's own conversation...
        await http.post(
            "/api/v1/chat", json={"session_id": session, "message": "bob here", "kb_prefix": "general"}, headers=bob
        )
        # ...and the model never saw Alice's history in Bob's turn.
        bob_prompt = [m["content"] for m in scripted_llm.requests[-1]["messages"]]
        assert not any("secret plan" in content for content in bob_prompt)
        # Clear: Bob clears only his own conversation.
        cleared = await http.post("/api/v1/clear", json={"session_id": session}, headers=bob)
        assert cleared.json()["cleared_messages"] == 2
        # Feedback: Bob cannot rate Alice's answer.
        rated = await http.post(
            "/api/v1/feedback", json={"message_id": alice_answer, "is_positive": False}, headers=bob
        )
        assert rated.status_code == 404

        alice_view = (await http.get(f"/api/v1/conversations/{session}/messages", headers=alice)).json()
        assert [m["content"] for m in alice_view["messages"]] == ["alice's secret plan", "ok"]
        own_rating = await http.post(
            "/api/v1/feedback", json={"message_id": alice_answer, "is_positive": True}, headers=alice
        )
        assert own_rating.status_code == 200


async def _chat(base_url: str, session: str, message: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=20) as http:
        response = await http.post(
            "/api/v1/chat", json={"session_id": session, "message": message, "kb_prefix": "orchard"}
        )
        assert response.status_code == 200, response.text
        return dict(response.json())


async def _messages(base_url: str, session: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base_url) as http:
        return await stored_messages(http, session)


async def test_history_survives_a_server_restart(history_store: dict[str, Any], data_dir: Path) -> None:
    overrides = history_store
    session = "restart-" + uuid.uuid4().hex[:8]
    with live_server(make_settings(data_dir, **overrides)) as first:
        answer = await _chat(first.base_url, session, "When is Blossom Sunday held?")
        before = await _messages(first.base_url, session)
    with live_server(make_settings(data_dir, **overrides)) as second:
        after = await _messages(second.base_url, session)
        await _chat(second.base_url, session, "And how much is the mill tour?")
        continued = await _messages(second.base_url, session)
    assert after == before
    assert [m["id"] for m in after] == [answer["user_message_id"], answer["message_id"]]
    assert after[1]["citations"] and after[1]["debug"]["generation_mode"] == "extractive"
    assert [m["role"] for m in continued] == ["user", "assistant", "user", "assistant"]


async def test_postgres_conversation_store_serves_the_stream(
    data_dir: Path, scripted_llm: ScriptedLLM, isolated_postgres_dsn: str
) -> None:
    from tests.support.sse import read_stream

    scripted_llm.script(Reply(tokens=["Second", " Sunday", " in", " May", " [1]."]))
    settings = make_settings(
        data_dir,
        CONVERSATION_STORE="postgres",
        POSTGRES_DSN=isolated_postgres_dsn,
        LLM_BASE_URL=scripted_llm.base_url,
        LLM_MODEL="scripted-model",
    )
    session = "pg-" + uuid.uuid4().hex[:8]
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=20) as http:
            capture = await read_stream(
                http, "/api/v1/chat/stream", {"session_id": session, "message": "When is Blossom Sunday held?"}
            )
            ready = (await http.get("/ready")).json()
        messages = await _messages(running.base_url, session)
    assert capture.text == "Second Sunday in May [1]."
    assert capture.statuses.index("citations") > capture.statuses.index("token")
    assert len(capture.of("citations")[0]["content"]) == 1
    assert ready["checks"]["conversation_store"] == "ok"
    assert [(m["role"], m["completed"]) for m in messages] == [("user", True), ("assistant", True)]
    assert messages[1]["id"] == capture.events[-1]["message_id"]


async def test_unreachable_postgres_means_not_ready_and_a_clear_503(data_dir: Path) -> None:
    settings = make_settings(
        data_dir, CONVERSATION_STORE="postgres", POSTGRES_DSN="postgresql://nobody:secret-pw@127.0.0.1:1/none"
    )
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            ready = await http.get("/ready")
            chat = await http.post("/api/v1/chat", json={"session_id": "s1", "message": "hello"})
            stream = await http.post("/api/v1/chat/stream", json={"session_id": "s1", "message": "hello"})
    assert ready.status_code == 503 and ready.json()["ready"] is False
    assert ready.json()["checks"]["knowledge_store"] == "ok"
    assert "secret-pw" not in ready.text
    for response in (chat, stream):
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "store_unavailable"
        assert "secret-pw" not in response.text
