"""Neo4j service fixtures (SPEC §12).

Where the server comes from, in order: `NEO4J_TEST_URI` (with `NEO4J_TEST_USER` / `NEO4J_TEST_PASSWORD`,
default `neo4j` and no password: the test server runs without auth); a throwaway testcontainers
`neo4j:5.26` when a Docker daemon answers; otherwise the test is skipped — or fails under
`REQUIRE_REAL_SERVICES=1`. `scripts/services/neo4j.sh` starts a local server and prints the variables.

The tests own that database: `neo4j_graph_store_factory` deletes every graph node in it (Community
Edition has one user database, so isolation is by wiping, and Neo4j tests must not run in parallel).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
from neo4j import AsyncGraphDatabase

from backend.infrastructure.graph_store.neo4j import Neo4jGraphStore
from backend.infrastructure.graph_store.neo4j.community_refresh import DEFAULT_BATCHES, BatchLimits
from backend.infrastructure.graph_store.neo4j.store import BULK_LOAD_MIN_DOCUMENTS, EXACT_SCAN_MAX
from tests.support.postgres import docker_answers, service_missing

NEO4J_IMAGE = "neo4j:5.26"
# The contract suite's vectors have 8 dimensions; the store scans small KBs exactly whatever the index's.
TEST_EMBEDDING_DIMENSION = 8

GraphStoreFactory = Callable[[], Awaitable[Neo4jGraphStore]]


@dataclass(frozen=True, slots=True)
class Neo4jServer:
    uri: str
    user: str
    password: str


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[Neo4jServer]:
    """A Neo4j 5 server the tests may write to (and wipe)."""
    uri = os.environ.get("NEO4J_TEST_URI")
    if uri:
        yield Neo4jServer(uri, os.environ.get("NEO4J_TEST_USER", "neo4j"), os.environ.get("NEO4J_TEST_PASSWORD", ""))
        return
    usable, reason = docker_answers()
    if not usable:
        service_missing(
            f'no Neo4j for tests: set NEO4J_TEST_URI (e.g. eval "$(scripts/services/neo4j.sh)") '
            f"or start Docker for testcontainers ({reason})"
        )
    from testcontainers.community.neo4j import Neo4jContainer

    with Neo4jContainer(NEO4J_IMAGE) as container:
        yield Neo4jServer(container.get_connection_url(), container.username, container.password)


@pytest.fixture(scope="session")
def neo4j_uri(neo4j_server: Neo4jServer) -> str:
    return neo4j_server.uri


async def emptied(server: Neo4jServer) -> dict[str, str]:
    """Delete everything on the test server; the settings that point a serving process at it."""
    store = await open_test_store(server)
    try:
        await store.delete_everything()
    finally:
        await store.close()
    return {
        "GRAPH_STORE": "neo4j",
        "NEO4J_URI": server.uri,
        "NEO4J_USER": server.user,
        "NEO4J_PASSWORD": server.password,
    }


async def open_test_store(
    server: Neo4jServer,
    exact_scan_max: int = EXACT_SCAN_MAX,
    community_batches: BatchLimits = DEFAULT_BATCHES,
    bulk_load_min_documents: int = BULK_LOAD_MIN_DOCUMENTS,
) -> Neo4jGraphStore:
    """A store on the test server, with the suite's vector dimension (vector indexes of another are rebuilt)."""
    store = await _open(server, exact_scan_max, community_batches, bulk_load_min_documents)
    stale = [name for name, size in store.vector_index_dimensions.items() if size != TEST_EMBEDDING_DIMENSION]
    if not stale:
        return store
    await store.close()
    await _drop_indexes(server, stale)
    return await _open(server, exact_scan_max, community_batches, bulk_load_min_documents)


async def _open(
    server: Neo4jServer, exact_scan_max: int, community_batches: BatchLimits, bulk_load_min_documents: int
) -> Neo4jGraphStore:
    return await Neo4jGraphStore.open(
        server.uri,
        server.user,
        server.password,
        embedding_dimension=TEST_EMBEDDING_DIMENSION,
        exact_scan_max=exact_scan_max,
        community_batches=community_batches,
        bulk_load_min_documents=bulk_load_min_documents,
    )


async def _drop_indexes(server: Neo4jServer, names: list[str]) -> None:
    # Left by a run with another dimension (a benchmark, say); the tests own this database.
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        for name in names:
            await driver.execute_query("DROP INDEX $name IF EXISTS", {"name": name})


@pytest.fixture
def neo4j_graph_store_factory(neo4j_server: Neo4jServer) -> GraphStoreFactory:
    """`await factory()` gives a fresh store on an emptied database; the caller closes it.

    A plain (not async) fixture on purpose: the contract suite requests it with `getfixturevalue()` from
    inside an async fixture, where pytest-asyncio cannot set up an async one. So the stores are closed by
    their users (the contract's `graph_store` fixture does), not here.
    """

    async def factory() -> Neo4jGraphStore:
        store = await open_test_store(neo4j_server)
        try:
            await store.delete_everything()
        except BaseException:
            await store.close()
            raise
        return store

    return factory
