"""A sample knowledge base ingested once per test session, copied into each test's data directory, and the
live server over it with the scripted model."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from backend.bootstrap import GRAPH_DB, open_knowledge_service
from tests.support.live_server import LiveServer, live_server, llm_settings, make_settings
from tests.support.scripted_llm import ScriptedLLM

SAMPLE_DOCUMENTS = Path(__file__).resolve().parents[2] / "samples" / "orchard" / "documents"


async def _ingest_sample(data_dir: Path) -> None:
    settings = make_settings(data_dir)
    async with open_knowledge_service(settings) as ingestion:
        folder = SAMPLE_DOCUMENTS
        report = await ingestion.ingest("orchard", ingestion.load_files([folder]))
        assert report.documents_added == 6


@pytest.fixture(scope="session")
def orchard_knowledge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("orchard-kb")
    asyncio.run(_ingest_sample(data_dir))
    return data_dir / GRAPH_DB


@pytest.fixture
def data_dir(tmp_path: Path, orchard_knowledge: Path) -> Path:
    target = tmp_path / "data"
    target.mkdir()
    shutil.copy(orchard_knowledge, target / GRAPH_DB)
    return target


@pytest.fixture
def server(data_dir: Path, scripted_llm: ScriptedLLM) -> Iterator[LiveServer]:
    with live_server(make_settings(data_dir, **llm_settings(scripted_llm))) as running:
        yield running


@pytest.fixture
async def client(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
        yield http


@pytest.fixture
def http(client: httpx.AsyncClient) -> httpx.AsyncClient:
    return client


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """The `openai` SDK against the live server's OpenAI-compatible routes. No retries: every request in these
    tests must be answered once, as sent."""
    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused-in-dev-mode", max_retries=0, timeout=20
    ) as client:
        yield client


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def history_store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings for each durable conversation store (Postgres: a fresh schema on the real server)."""
    if request.param == "postgres":
        return {"CONVERSATION_STORE": "postgres", "POSTGRES_DSN": request.getfixturevalue("isolated_postgres_dsn")}
    return {"CONVERSATION_STORE": "sqlite"}


async def stored_messages(http: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v1/conversations/{session}/messages")
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def stored_when(http: httpx.AsyncClient, session: str, count: int) -> list[dict[str, Any]]:
    """The session's stored messages once there are `count` (a stream's answer is saved as it ends)."""
    for _ in range(200):
        response = await http.get(f"/api/v1/conversations/{session}/messages")
        if response.status_code == 200 and len(response.json()["messages"]) >= count:
            return list(response.json()["messages"])
        await asyncio.sleep(0.025)
    raise AssertionError(f"{session} never reached {count} messages")


async def orchard_titles(http: httpx.AsyncClient) -> set[str]:
    documents = (await http.get("/api/v1/kbs/orchard/documents")).json()["documents"]
    return {document["title"] for document in documents}
