"""Concurrent creations of one KB over HTTP (issue 21): exactly one 201, the rest 409 `conflict`, and the 201's
definition is the one kept — sent to two `python -m backend serve` processes sharing one graph store (the embedded
file or Neo4j), so that only the store can decide."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.application.ports.graph_store import GraphStore
from backend.bootstrap import GRAPH_DB
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from tests.support.live_server import SAMPLE_REGISTRY
from tests.support.neo4j import Neo4jServer, emptied, open_test_store
from tests.support.serve_process import ServeProcess

pytestmark = pytest.mark.slow

ADMIN_KEY = "race-admin-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ROUNDS = 5  # the race is not lost every time: several rounds make the old check-then-save fail every run
RIVALS = 10


@dataclass(frozen=True)
class SharedStore:
    settings: dict[str, str]
    open: Callable[[], Awaitable[GraphStore]]  # the store itself, to read what it kept


@pytest.fixture(params=["embedded", "neo4j"])
async def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> SharedStore:
    data_dir = tmp_path / "data"  # both processes use it: the embedded store is its graph file
    if request.param == "embedded":
        settings = {"GRAPH_STORE": "embedded", "DATA_DIR": str(data_dir)}
        return SharedStore(settings, lambda: EmbeddedGraphStore.open(data_dir / GRAPH_DB))
    neo4j: Neo4jServer = request.getfixturevalue("neo4j_server")
    settings = await emptied(neo4j) | {"DATA_DIR": str(data_dir)}
    return SharedStore(settings, lambda: open_test_store(neo4j))


@pytest.fixture
def two_servers(tmp_path: Path, shared_store: SharedStore) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    settings = shared_store.settings | {
        "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY),
        "AUTH_MODE": "api_key",
        "API_KEYS": f"{ADMIN_KEY}=ada",
        "ADMIN_USERS": "ada",
        "RATE_LIMIT_PER_MINUTE": "0",
        "CONVERSATION_STORE": "sqlite",
        "EXTRACTOR": "offline",
        "LLM_BASE_URL": "",
        "LLM_MODEL": "",
        "LOG_LEVEL": "WARNING",
    }
    servers: list[ServeProcess] = []
    try:
        for name in ("a", "b"):
            workdir = tmp_path / name
            workdir.mkdir()
            servers.append(ServeProcess(settings, workdir))
            servers[-1].wait_until_healthy()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.close()


async def listed(http: httpx.AsyncClient, server: ServeProcess) -> dict[str, dict[str, Any]]:
    response = await http.get(f"{server.base_url}/api/v1/kbs", headers=ADMIN)
    assert response.status_code == 200, response.text
    return {kb["kb_prefix"]: kb for kb in response.json()["knowledge_bases"]}


async def test_concurrent_creations_of_one_kb_give_one_201_and_keep_its_definition(
    two_servers: tuple[ServeProcess, ServeProcess], shared_store: SharedStore
) -> None:
    winners: dict[str, dict[str, Any]] = {}
    async with httpx.AsyncClient(timeout=60) as http:
        for round_ in range(ROUNDS):
            prefix = f"race_{round_}"
            bodies = [
                {"kb_prefix": prefix, "description": f"definition {i}", "keywords": [f"word{i}"]} for i in range(RIVALS)
            ]
            servers = list(two_servers) * (RIVALS // 2)
            responses = await asyncio.gather(
                *(
                    http.post(f"{server.base_url}/api/v1/kbs", json=body, headers=ADMIN)
                    for server, body in zip(servers, bodies, strict=True)
                )
            )
            statuses = [response.status_code for response in responses]
            assert sorted(statuses) == [201] + [409] * (RIVALS - 1), f"round {round_}: {statuses}"
            assert all(r.json()["error"]["code"] == "conflict" for r in responses if r.status_code == 409)
            won = statuses.index(201)
            winners[prefix] = responses[won].json()
            assert winners[prefix]["description"] == bodies[won]["description"]
            assert (await listed(http, servers[won]))[prefix] == winners[prefix]

    store = await shared_store.open()
    try:
        kept = {kb.kb_prefix: kb for kb in await store.list_knowledge_bases()}
    finally:
        await store.close()
    assert sorted(kept) == sorted(winners)
    for prefix, winner in winners.items():
        assert (kept[prefix].description, list(kept[prefix].keywords)) == (winner["description"], winner["keywords"])
