"""Scale-out (issue 6): two server processes that share nothing but one Postgres and one Neo4j.

A conversation started on one continues on the other, a session's messages sent alternately to both keep
their order while both are under load, and a KB created and filled on one answers queries on the other.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.neo4j import Neo4jServer, emptied
from tests.support.serve_process import ServeProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

KEYS = {"admin": "scale-admin-0123456789", "alice": "scale-alice-0123456789"}
EMPTY_REGISTRY = "# no knowledge bases from the file: they are created through the API\n"
DOCUMENTS = [
    {
        "title": "Harbour opening",
        "text": "The Saltmere harbour opened in 1887 after nine years of work.",
        "source": "h1",
    },
    {"title": "Lighthouse", "text": "The Saltmere lighthouse was lit in 1890 and automated in 1979.", "source": "h2"},
]


@pytest.fixture
async def empty_neo4j(neo4j_server: Neo4jServer) -> dict[str, str]:
    return await emptied(neo4j_server)


@pytest.fixture
def two_servers(
    tmp_path: Path, empty_neo4j: dict[str, str], isolated_postgres_dsn: str
) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    registry = tmp_path / "kb_registry.toml"
    registry.write_text(EMPTY_REGISTRY)
    shared = {
        "AUTH_MODE": "api_key",
        "API_KEYS": f"{KEYS['admin']}=ada,{KEYS['alice']}=alice",
        "ADMIN_USERS": "ada",
        "RATE_LIMIT_PER_MINUTE": "0",
        "KB_REGISTRY_PATH": str(registry),
        "CONVERSATION_STORE": "postgres",
        "POSTGRES_DSN": isolated_postgres_dsn,
        **empty_neo4j,
        "EXTRACTOR": "offline",
        "LLM_BASE_URL": "",
        "LLM_MODEL": "",
        "COMMUNITY_REFRESH_DELAY_S": "0.1",
        "LOG_LEVEL": "WARNING",
    }
    servers = []
    try:
        for name in ("a", "b"):  # each its own process and data directory: nothing shared on this side
            workdir = tmp_path / name
            workdir.mkdir()
            server = ServeProcess(shared | {"DATA_DIR": str(workdir / "data")}, workdir)
            servers.append(server)
            server.wait_until_healthy()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.close()


@pytest.fixture
async def clients(two_servers: tuple[ServeProcess, ServeProcess]) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    a, b = two_servers
    async with (
        httpx.AsyncClient(base_url=a.base_url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=60) as on_b,
    ):
        yield on_a, on_b


def as_user(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


async def send(client: httpx.AsyncClient, session: str, message: str, kb: str = "general") -> dict[str, Any]:
    body = {"session_id": session, "message": message, "kb_prefix": kb}
    response = await client.post("/api/v1/chat", json=body, headers=as_user("alice"))
    assert response.status_code == 200, response.text
    return dict(response.json())


async def history(client: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/conversations/{session}/messages", headers=as_user("alice"))
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def create_and_fill_kb(client: httpx.AsyncClient) -> None:
    body = {"kb_prefix": "harbour", "description": "Saltmere harbour history", "keywords": ["saltmere"]}
    created = await client.post("/api/v1/kbs", json=body, headers=as_user("admin"))
    assert created.status_code == 201, created.text
    ingested = await client.post(
        "/api/v1/kbs/harbour/documents?wait=true", json={"documents": DOCUMENTS}, headers=as_user("admin")
    )
    assert ingested.status_code == 201, ingested.text


async def test_an_ingestion_on_one_process_answers_queries_on_the_other(clients: tuple[httpx.AsyncClient, ...]) -> None:
    on_a, on_b = clients
    await create_and_fill_kb(on_a)
    listed = await on_b.get("/api/v1/kbs", headers=as_user("alice"))
    assert "harbour" in [kb["kb_prefix"] for kb in listed.json()["knowledge_bases"]]
    body = {"query": "When was the Saltmere lighthouse lit?", "agent_type": "naive_rag_agent", "top_k": 3}
    retrieved = await on_b.post("/api/v1/kbs/harbour/retrieve", json=body, headers=as_user("alice"))
    assert retrieved.status_code == 200, retrieved.text
    assert retrieved.json()["retrieval_results"][0]["source"]["title"] == "Lighthouse"


async def test_a_conversation_started_on_one_process_continues_on_the_other(
    clients: tuple[httpx.AsyncClient, ...],
) -> None:
    on_a, on_b = clients
    await create_and_fill_kb(on_a)
    session = "scale-" + uuid.uuid4().hex[:8]
    first = await send(on_a, session, "When did the Saltmere harbour open?", "harbour")
    second = await send(on_b, session, "And when was the Saltmere lighthouse lit?", "harbour")
    assert "1887" in first["answer"] and "1890" in second["answer"]
    seen_from_a, seen_from_b = await history(on_a, session), await history(on_b, session)
    assert seen_from_a == seen_from_b
    ids = [first["user_message_id"], first["message_id"], second["user_message_id"], second["message_id"]]
    assert [m["id"] for m in seen_from_a] == ids


async def test_messages_sent_alternately_to_both_processes_keep_their_order_under_load(
    clients: tuple[httpx.AsyncClient, ...],
) -> None:
    on_a, on_b = clients
    session = "order-" + uuid.uuid4().hex[:8]
    sent = [f"turn {i}" for i in range(10)]

    async def alternating() -> None:
        for index, message in enumerate(sent):
            await send(on_a if index % 2 == 0 else on_b, session, message)

    async def noise(client: httpx.AsyncClient, index: int) -> None:
        for turn in range(3):
            await send(client, f"noise-{index}-{session}", f"noise {turn}")

    await asyncio.gather(alternating(), *(noise(client, i) for i in range(6) for client in (on_a, on_b)))
    stored = await history(on_b, session)
    assert [m["content"] for m in stored if m["role"] == "user"] == sent
    assert [m["role"] for m in stored] == ["user", "assistant"] * len(sent)
    assert stored == await history(on_a, session)
