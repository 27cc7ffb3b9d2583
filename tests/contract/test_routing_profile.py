"""The routing profile's contract (`TermProfiles`), for every GraphStore adapter: the embedded store and Neo4j.

A KB's profile counts its chunks and, per routing term, the chunks that hold it (title included); writes,
replacements and deletes change it in the transaction that changes the chunks, and a KB never sees another's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from neo4j import AsyncGraphDatabase

from backend.application.ports.graph_store import DocumentWrite, GraphStore
from backend.domain import ids
from backend.domain.graph import ChunkRecord, DocumentGraph, DocumentRecord
from backend.graphrag_agent.ports import TermCounts
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from tests.support.neo4j import Neo4jServer, open_test_store

KB = "orchard"
OTHER_KB = "meadow"
DIM = 8


def document(kb: str, title: str, *texts: str) -> DocumentWrite:
    doc_id = ids.document_id(title, "\n".join(texts))
    chunks = tuple(ChunkRecord(ids.chunk_id(kb, doc_id, n), doc_id, n, text) for n, text in enumerate(texts))
    vectors = [np.eye(DIM, dtype=np.float32)[n % DIM] for n in range(len(texts))]
    return DocumentWrite(DocumentGraph(DocumentRecord(doc_id, title), chunks), vectors, {})


def replaced(write: DocumentWrite, kb: str, *texts: str) -> DocumentWrite:
    """Another version of the same document (same id)."""
    doc_id = write.graph.document.doc_id
    chunks = tuple(ChunkRecord(ids.chunk_id(kb, doc_id, n), doc_id, n, text) for n, text in enumerate(texts))
    vectors = [np.eye(DIM, dtype=np.float32)[n % DIM] for n in range(len(texts))]
    return DocumentWrite(DocumentGraph(write.graph.document, chunks), vectors, {})


BEES = document(KB, "Bees", "The beekeeper keeps thirty hives.", "Hamish Dunmore checks the hives in May.")
CIDER = document(KB, "Cider", "Old Tobias is aged in oak. 松鸦 is a bird.")
TERMS = ["bee", "beekeep", "hive", "hamish", "cider", "tobia", "oak", "松鸦", "松", "may", "absent"]


async def profile(store: GraphStore, kb: str = KB) -> TermCounts:
    return (await store.term_frequencies([kb], TERMS))[kb]


async def test_the_profile_counts_the_chunks_that_hold_each_term(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [BEES, CIDER])
    counts = await profile(graph_store)
    assert counts.chunks == 3
    # The title goes with every chunk; words are stemmed ("beekeeper", "hives"), CJK counted by characters too.
    expected = {"bee": 2, "beekeep": 1, "hive": 2, "hamish": 1, "cider": 1, "tobia": 1, "oak": 1, "松鸦": 1}
    assert dict(counts.frequencies) == expected | {"松": 1, "may": 1}


async def test_one_read_answers_for_every_kb_asked(graph_store: GraphStore) -> None:
    await graph_store.upsert_document(KB, BEES.graph, BEES.chunk_vectors, {})
    meadow = document(OTHER_KB, "Meadow", "Wild bees nest in the meadow.")
    await graph_store.upsert_document(OTHER_KB, meadow.graph, meadow.chunk_vectors, {})
    found = await graph_store.term_frequencies([KB, OTHER_KB, "nowhere"], ["bee", "meadow", "beekeep"])
    assert found == {
        KB: TermCounts(2, {"bee": 2, "beekeep": 1}),
        OTHER_KB: TermCounts(1, {"bee": 1, "meadow": 1}),
        "nowhere": TermCounts(0, {}),
    }


async def test_replacing_a_document_replaces_its_counts(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [BEES, CIDER])
    again = replaced(BEES, KB, "The beekeeper retired.")
    await graph_store.upsert_document(KB, again.graph, again.chunk_vectors, {})
    counts = await profile(graph_store)
    assert counts.chunks == 2
    assert dict(counts.frequencies) == {"bee": 1, "beekeep": 1, "cider": 1, "tobia": 1, "oak": 1, "松鸦": 1, "松": 1}


async def test_a_batch_counts_only_the_last_version_of_a_document(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [BEES, replaced(BEES, KB, "Hamish left.")])
    assert await profile(graph_store) == TermCounts(1, {"bee": 1, "hamish": 1})


async def test_deleting_a_document_takes_its_counts_back(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [BEES, CIDER])
    assert await graph_store.delete_document(KB, BEES.graph.document.doc_id)
    assert await profile(graph_store) == TermCounts(1, {"cider": 1, "tobia": 1, "oak": 1, "松鸦": 1, "松": 1})
    assert await graph_store.delete_document(KB, CIDER.graph.document.doc_id)
    assert await profile(graph_store) == TermCounts(0, {})


async def test_a_kbs_documents_never_count_in_another_kb(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [BEES])
    other = document(OTHER_KB, "Bees", "The beekeeper keeps thirty hives.", "Hamish Dunmore checks the hives in May.")
    await graph_store.upsert_documents(OTHER_KB, [other])
    assert await graph_store.delete_document(OTHER_KB, other.graph.document.doc_id)
    assert await profile(graph_store, OTHER_KB) == TermCounts(0, {})
    assert (await profile(graph_store)).frequencies["hive"] == 2


async def test_a_store_written_before_profiles_gets_them_when_opened(
    request: pytest.FixtureRequest, graph_store: GraphStore, tmp_path: Path
) -> None:
    await graph_store.upsert_documents(KB, [BEES, CIDER])
    expected = await profile(graph_store)
    await graph_store.close()
    if request.node.callspec.params["graph_store"] == "embedded":
        _strip_embedded(tmp_path / "graph.db")
        reopened: GraphStore = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    else:
        server = request.getfixturevalue("neo4j_server")
        await _strip_neo4j(server)
        reopened = await open_test_store(server)
    try:
        assert await profile(reopened) == expected
        assert await reopened.delete_document(KB, BEES.graph.document.doc_id)
        assert (await profile(reopened)).chunks == 1
    finally:
        await reopened.close()


def _strip_embedded(path: Path) -> None:
    """The file as version 1 of the schema left it: no profile."""
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("DROP TABLE routing_terms")
        raw.execute("DROP TABLE document_terms")
        raw.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
    raw.close()


async def _strip_neo4j(server: Neo4jServer) -> None:
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        await driver.execute_query("MATCH (t:RoutingTerm) DELETE t")
        await driver.execute_query("MATCH (d:Document) REMOVE d.profile_terms, d.profile_chunks")
