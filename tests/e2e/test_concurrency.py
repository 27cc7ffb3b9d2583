"""Concurrency over real HTTP (issue 6): first messages racing for one conversation, the order of a session's
messages under load, and ingestion racing queries on one KB — with the history in a real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.scripted_llm import ScriptedLLM


@pytest.fixture
def postgres_settings(isolated_postgres_dsn: str, scripted_llm: ScriptedLLM) -> dict[str, Any]:
    return {"CONVERSATION_STORE": "postgres", "POSTGRES_DSN": isolated_postgres_dsn, **llm_settings(scripted_llm)}


async def chat(client: httpx.AsyncClient, session: str, message: str) -> dict[str, Any]:
    response = await client.post(
        "/api/v1/chat", json={"session_id": session, "message": message, "kb_prefix": "general"}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def stored(client: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/conversations/{session}/messages", params={"limit": 200})
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def test_fifty_concurrent_first_messages_make_one_conversation_and_lose_nothing(
    data_dir: Path, postgres_settings: dict[str, Any], isolated_postgres_dsn: str
) -> None:
    session = "race-" + uuid.uuid4().hex[:8]
    with live_server(make_settings(data_dir, **postgres_settings)) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            answers = await asyncio.gather(*(chat(client, session, f"message {i}") for i in range(50)))
            messages = await stored(client, session)

    connection = await asyncpg.connect(isolated_postgres_dsn)
    try:
        conversations = await connection.fetchval("SELECT count(*) FROM conversations WHERE session_id = $1", session)
    finally:
        await connection.close()
    assert conversations == 1
    assert len(messages) == 100
    assert sorted(m["content"] for m in messages if m["role"] == "user") == sorted(f"message {i}" for i in range(50))
    # Every answer is stored, after its own question.
    position = {m["id"]: index for index, m in enumerate(messages)}
    for answer in answers:
        assert position[answer["user_message_id"]] < position[answer["message_id"]]


async def test_a_sessions_messages_keep_their_order_while_other_sessions_load_the_server(
    data_dir: Path, postgres_settings: dict[str, Any]
) -> None:
    session = "ordered-" + uuid.uuid4().hex[:8]
    sent = [f"step {i}" for i in range(12)]
    with live_server(make_settings(data_dir, **postgres_settings)) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:

            async def one_session_in_order() -> None:
                for message in sent:  # each waits for its answer, as a person typing would
                    await chat(client, session, message)

            async def noise(index: int) -> None:
                for turn in range(4):
                    await chat(client, f"noise-{index}-{session}", f"noise {turn}")

            await asyncio.gather(one_session_in_order(), *(noise(i) for i in range(10)))
            messages = await stored(client, session)
    assert [m["content"] for m in messages if m["role"] == "user"] == sent
    assert [m["role"] for m in messages] == ["user", "assistant"] * len(sent)
    created = [m["created_at"] for m in messages]
    assert created == sorted(created)


KEYS = {"admin": "key-admin-0123456789"}
ADMIN = {"Authorization": f"Bearer {KEYS['admin']}"}
PARAGRAPH = "Paragraph {p} of the report on marker{i}: the committee met, read the accounts and agreed the plan. " * 8


def report(i: int) -> dict[str, str]:
    """A document long enough to make several chunks, each naming its marker."""
    return {
        "title": f"Report {i}",
        "text": "\n\n".join(PARAGRAPH.format(p=p, i=i) for p in range(6)),
        "source": f"r{i}",
    }


async def test_queries_racing_ingestion_never_see_a_half_written_document(data_dir: Path) -> None:
    """Each document is written in one transaction: a query sees all of it or none of it."""
    documents = 12
    settings = make_settings(
        # One admin polls as fast as the server answers: the per-user rate limit would cut the race short.
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS=f"{KEYS['admin']}=ada",
        ADMIN_USERS="ada",
        RATE_LIMIT_PER_MINUTE=0,
    )
    seen: list[tuple[str, int]] = []  # (doc id, chunks the listing said it had) while ingestion ran
    hits: list[str] = []  # ids of the documents of chunks retrieved while ingestion ran
    with live_server(settings) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120, headers=ADMIN) as client:
            created = await client.post("/api/v1/kbs", json={"kb_prefix": "reports", "description": "reports"})
            assert created.status_code == 201, created.text
            done = asyncio.Event()

            async def ingest() -> None:
                for i in range(documents):
                    body = {"documents": [report(i)]}
                    response = await client.post("/api/v1/kbs/reports/documents?wait=true", json=body)
                    assert response.status_code == 201, response.text
                done.set()

            async def query() -> None:
                turn = 0
                while not done.is_set():
                    turn += 1
                    listed = (await client.get("/api/v1/kbs/reports/documents")).json()["documents"]
                    seen.extend((d["doc_id"], d["chunk_count"]) for d in listed)
                    body = {
                        "query": f"marker{turn % documents} committee",
                        "agent_type": "naive_rag_agent",
                        "top_k": 20,
                    }
                    retrieved = (await client.post("/api/v1/kbs/reports/retrieve", json=body)).json()
                    found = list(dict.fromkeys(r["source"]["doc_id"] for r in retrieved["retrieval_results"]))
                    hits.extend(found)
                    for doc_id in found[:3]:  # a retrieved chunk's document is there, whole, at once
                        one = await client.get(f"/api/v1/kbs/reports/documents/{doc_id}")
                        assert one.status_code == 200, one.text
                        seen.append((doc_id, one.json()["chunk_count"]))

            await asyncio.gather(ingest(), query(), query())
            final = {
                d["doc_id"]: d["chunk_count"]
                for d in (await client.get("/api/v1/kbs/reports/documents")).json()["documents"]
            }

    assert len(final) == documents and all(count > 1 for count in final.values())
    assert seen and hits, "the queries ran while documents were written"
    # A document listed or read mid-ingestion already had all its chunks.
    assert all(final[doc_id] == count for doc_id, count in seen)
    assert set(hits) <= set(final)
