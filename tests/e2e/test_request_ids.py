"""A request id names one message: a retry (same id, same request) replays it, another message under the same id is
a 409 and stores nothing. On each durable history store (SQLite, and Postgres on the real server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import stored_messages
from tests.e2e.test_agui import run_input
from tests.support.live_server import LiveServer, live_server, make_settings


@pytest.fixture
def running(history_store: dict[str, Any], data_dir: Path) -> Iterator[LiveServer]:
    with live_server(make_settings(data_dir, **history_store)) as server:
        yield server


async def test_a_retry_replays_and_another_message_under_the_same_id_is_a_409(running: LiveServer) -> None:
    session = "rid-" + uuid.uuid4().hex[:8]
    request_id = "req-" + uuid.uuid4().hex
    headers = {"X-Request-ID": request_id}
    first = {"session_id": session, "message": "When is Blossom Sunday held?", "kb_prefix": "orchard"}
    async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
        answered = await http.post("/api/v1/chat", json=first, headers=headers)
        retried = await http.post("/api/v1/chat", json=first, headers=headers)
        other = first | {"message": "How much is the tour?"}
        other_message = await http.post("/api/v1/chat", json=other, headers=headers)
        other_route = await http.post("/api/v1/chat", json=first | {"agent_type": "graph_agent"}, headers=headers)
        streamed = await http.post("/api/v1/chat/stream", json=first | {"message": "Who founded it?"}, headers=headers)
        stored = await stored_messages(http, session)

    assert answered.status_code == retried.status_code == 200, (answered.text, retried.text)
    assert retried.json()["message_id"] == answered.json()["message_id"]
    assert retried.json()["user_message_id"] == answered.json()["user_message_id"]
    for refused in (other_message, other_route, streamed):
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "request_id_reused"
    assert [(m["role"], m["content"][:28]) for m in stored] == [
        ("user", "When is Blossom Sunday held?"),
        ("assistant", answered.json()["answer"][:28]),
    ]


async def test_an_agui_run_id_names_one_question(running: LiveServer) -> None:
    thread = "rid-" + uuid.uuid4().hex[:8]
    first = run_input(thread, "When is Blossom Sunday held?")
    async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
        answered = await http.post("/api/v1/agui", json=first)
        second = run_input(thread, "How much is the tour?") | {"runId": first["runId"]}
        other = await http.post("/api/v1/agui", json=second)
        stored = await stored_messages(http, thread)

    assert answered.status_code == 200, answered.text
    assert other.status_code == 409 and other.json()["error"]["code"] == "request_id_reused", other.text
    assert [m["content"] for m in stored if m["role"] == "user"] == ["When is Blossom Sunday held?"]
