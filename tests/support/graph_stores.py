"""A fresh, empty GraphStore of each adapter: the embedded SQLite store, and Neo4j when it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.application.ports.graph_store import GraphStore
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore


@pytest.fixture(params=["embedded", "neo4j"])
async def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GraphStore]:
    if request.param == "embedded":
        store: GraphStore = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    else:
        # tests/support/neo4j.py: an async factory of fresh, empty, isolated stores (or one such store).
        provided: Any = request.getfixturevalue("neo4j_graph_store_factory")
        store = await provided() if callable(provided) else provided
    yield store
    await store.close()
