"""Neo4j service fixtures (placeholder until the Neo4j store lands: every Neo4j case is skipped)."""

from __future__ import annotations

import pytest


@pytest.fixture
def neo4j_graph_store_factory() -> None:
    pytest.skip("the Neo4j graph store is not implemented yet")
