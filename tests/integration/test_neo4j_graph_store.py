"""What only the Neo4j GraphStore has: its schema, the vector index path, and driver error translation.

The contract suite (`tests/contract/test_graph_store.py`) covers the GraphStore behaviour both stores share.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import neo4j
import neo4j.exceptions
import numpy as np
import pytest
from neo4j import AsyncGraphDatabase

from backend.application.ports.graph_store import DocumentWrite, GraphCounts
from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentGraph,
    DocumentRecord,
    EntityMention,
    RelationMention,
)
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.ports import Vector
from backend.infrastructure.graph_store.merge import merge_entity, merge_relation
from backend.infrastructure.graph_store.neo4j import Neo4jGraphStore
from backend.infrastructure.graph_store.neo4j.community_refresh import BatchLimits
from backend.infrastructure.graph_store.neo4j.errors import DRIVER_ERRORS, store_unavailable
from backend.infrastructure.graph_store.neo4j.params import DocumentParams, document_params
from backend.infrastructure.graph_store.neo4j.store import _groups_of_chunks, lucene_query
from tests.support.neo4j import TEST_EMBEDDING_DIMENSION, Neo4jServer, open_test_store
from tests.support.tcp_forwarder import TcpForwarder, closed_port

DIM = TEST_EMBEDDING_DIMENSION
PASSWORD = "s3cret-Pa55word"  # a dummy, checked never to appear in messages
UNREACHABLE = "bolt://127.0.0.1:1"  # port 1: nothing listens there

EXPECTED_RULES = {
    "graphrag_knowledge_base_uid",
    "graphrag_document_uid",
    "graphrag_chunk_uid",
    "graphrag_entity_uid",
    "graphrag_community_uid",
    "graphrag_community_set_uid",
    "graphrag_document_kb",
    "graphrag_document_source",
    "graphrag_chunk_kb",
    "graphrag_entity_kb",
    "graphrag_community_kb",
    "graphrag_relation_mention_pair",
    "graphrag_relation_mention_doc",
    "graphrag_chunk_terms",
    "graphrag_entity_terms",
    "graphrag_chunk_embedding",
    "graphrag_entity_embedding",
    "graphrag_community_embedding",
}
VECTOR_INDEXES = {"graphrag_chunk_embedding", "graphrag_entity_embedding", "graphrag_community_embedding"}

HOSTILE = [
    "x') DETACH DELETE n //",
    "'; MATCH (n) DETACH DELETE n; //",
    '"}) RETURN 1 UNION MATCH (n) RETURN n //',
    "`Chunk`:`Entity`",
    "$kb {uid: $uid}",
    '["kb","id"]',
    "\\ \\\\ \\u0000 \\'",
    "+kbt:* OR terms:*^9 [* TO *] /.*/ ~ ? ( ) { } && || !",
    "line1\nline2\r\n\ttabbed",
    "nul\x00byte",
    "苹果酒 «guillemets» 🍎 zero\u200bwidth",
    "x" * 5000,
]


def axis(index: int) -> Vector:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[index % DIM] = 1.0
    return vector


@pytest.fixture
async def store(neo4j_server: Neo4jServer) -> AsyncIterator[Neo4jGraphStore]:
    opened = await open_test_store(neo4j_server)
    await opened.delete_everything()
    yield opened
    await opened.close()


def simple_document(kb: str, doc_id: str, text: str, entity: str = "Apple") -> DocumentGraph:
    chunk = ChunkRecord(f"{doc_id}-c0", doc_id, 0, text, 0, len(text))
    mention = EntityMention(f"{kb}-{entity}", entity, "thing", f"{entity} in {doc_id}", chunk.chunk_id)
    return DocumentGraph(DocumentRecord(doc_id, f"Title {doc_id}"), (chunk,), (mention,))


# -- schema ---------------------------------------------------------------------------------------------------


async def test_schema_is_created_once_and_opening_again_changes_nothing(neo4j_server: Neo4jServer) -> None:
    first = await open_test_store(neo4j_server)
    try:
        before = await _schema_rules(neo4j_server)
        second = await open_test_store(neo4j_server)
        try:
            await second.ping()
            assert await _schema_rules(neo4j_server) == before
        finally:
            await second.close()
    finally:
        await first.close()
    assert {name for name, _, _ in before} >= EXPECTED_RULES
    assert all(state == "ONLINE" for name, _, state in before if name in EXPECTED_RULES)


async def _schema_rules(server: Neo4jServer) -> list[tuple[str, str, str]]:
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        found = await driver.execute_query(
            "SHOW INDEXES YIELD name, type, state RETURN name, type, state ORDER BY name"
        )
    return [(r["name"], r["type"], r["state"]) for r in found.records]


# -- driver errors -------------------------------------------------------------------------------------------


def _driver_error_classes() -> list[type[BaseException]]:
    members = inspect.getmembers(neo4j.exceptions, inspect.isclass)
    return sorted((cls for _, cls in members if issubclass(cls, neo4j.exceptions.GqlError)), key=lambda c: c.__name__)


def test_every_driver_error_class_is_translated() -> None:
    classes = _driver_error_classes()
    assert len(classes) > 20  # the module was really read
    for cls in [*classes, OSError, ConnectionResetError]:
        exc = cls(f"boom {PASSWORD}")
        assert isinstance(exc, DRIVER_ERRORS), cls
        translated = store_unavailable(exc, "counts", "bolt://db:7687", (PASSWORD,))
        assert isinstance(translated, StoreUnavailable)
        assert PASSWORD not in translated.message
        assert "counts" in translated.message and "bolt://db:7687" in translated.message


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (neo4j.exceptions.ServiceUnavailable("down"), "cannot be reached"),
        (neo4j.exceptions.SessionExpired("gone"), "connection was lost"),
        (neo4j.exceptions.AuthError("no"), "authentication was refused"),
        (neo4j.exceptions.TransientError("deadlock"), "transient failure"),
        (neo4j.exceptions.DatabaseError("disk"), "server failed"),
        (neo4j.exceptions.CypherSyntaxError("bad"), "refused the request"),
        (neo4j.exceptions.ConnectionAcquisitionTimeoutError("busy"), "no connection became free"),
        (ConnectionResetError("reset"), "network error"),
    ],
)
async def test_store_methods_raise_store_unavailable_for_each_kind(error: BaseException, kind: str) -> None:
    # No retry time: the store would otherwise retry the retryable kinds (tested below) for 15 s.
    store = Neo4jGraphStore(_FailingDriver(error), server="bolt://db:7687", max_retry_time_s=0.0)  # type: ignore[arg-type]
    calls: list[Callable[[], Awaitable[object]]] = [
        store.ping,
        lambda: store.counts("kb"),
        lambda: store.delete_document("kb", "d"),
        store.list_knowledge_bases,
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable, match=kind) as raised:
            await call()
        assert raised.value.__cause__ is error


class _FailingDriver:
    """Just enough of an AsyncDriver to fail the way a real one does, for every entry point the store uses."""

    execute_query_bookmark_manager = None

    def __init__(self, error: BaseException) -> None:
        self._error = error

    async def execute_query(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error

    def session(self, **config: Any) -> _FailingDriver:
        return self

    async def __aenter__(self) -> _FailingDriver:
        raise self._error

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_a_read_that_loses_its_connection_is_retried(
    store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads are auto-commit queries, which the driver does not retry: the store does, as the driver would.
    assert await store.create_knowledge_base(KnowledgeBase("retried"))
    opened: list[str] = []
    real_session = store._session

    def flaky_session(access_mode: str = neo4j.WRITE_ACCESS) -> Any:
        opened.append(access_mode)
        if len(opened) == 1:
            return _FailingDriver(neo4j.exceptions.SessionExpired("connection lost"))
        return real_session(access_mode)

    monkeypatch.setattr(store, "_session", flaky_session)
    knowledge_bases = await store.list_knowledge_bases()

    assert "retried" in [kb.kb_prefix for kb in knowledge_bases]
    assert opened == [neo4j.READ_ACCESS, neo4j.READ_ACCESS]


async def test_a_refused_read_is_not_retried(store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []

    def refusing_session(access_mode: str = neo4j.WRITE_ACCESS) -> Any:
        opened.append(access_mode)
        return _FailingDriver(neo4j.exceptions.CypherSyntaxError("bad query"))

    monkeypatch.setattr(store, "_session", refusing_session)
    with pytest.raises(StoreUnavailable, match="refused the request"):
        await store.list_knowledge_bases()

    assert len(opened) == 1


async def test_an_unreachable_server_gives_store_unavailable() -> None:
    driver = AsyncGraphDatabase.driver(UNREACHABLE, auth=("neo4j", PASSWORD), connection_timeout=2.0)
    store = Neo4jGraphStore(driver, server=UNREACHABLE, secrets=(PASSWORD,))
    try:
        with pytest.raises(StoreUnavailable, match="cannot be reached") as raised:
            await store.ping()
        assert PASSWORD not in str(raised.value)
    finally:
        await store.close()
    with pytest.raises(StoreUnavailable) as opened:
        await Neo4jGraphStore.open(UNREACHABLE, "neo4j", PASSWORD, connection_timeout_s=2.0)
    assert PASSWORD not in str(opened.value)


@pytest.mark.parametrize("uri", ["http://127.0.0.1:7474", "not a uri", "bolt://user:pw-in-uri@127.0.0.1:1"])
async def test_a_bad_uri_gives_store_unavailable_without_credentials(uri: str) -> None:
    with pytest.raises(StoreUnavailable) as raised:
        await Neo4jGraphStore.open(uri, "neo4j", PASSWORD, connection_timeout_s=2.0, max_retry_time_s=0.5)
    assert PASSWORD not in str(raised.value)
    assert "pw-in-uri" not in str(raised.value)


async def test_a_closed_store_refuses_work(store: Neo4jGraphStore) -> None:
    await store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.counts("kb")
    await store.close()  # idempotent


# -- values, never syntax ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_strings_are_stored_and_read_back_verbatim(store: Neo4jGraphStore, text: str) -> None:
    kb, doc_id, chunk_id = f"kb {text}", f"doc {text}", f"chunk {text}"
    source_id, target_id = f"e1 {text}", f"e2 {text}"
    chunk = ChunkRecord(chunk_id, doc_id, 0, f"apple {text}", 0, 5)
    graph = DocumentGraph(
        DocumentRecord(doc_id, f"title {text}", {text: text, "nested": [text, {"k": text}]}, f"source {text}"),
        (chunk,),
        (
            EntityMention(source_id, f"Apple {text}", f"type {text}", f"description {text}", chunk_id),
            EntityMention(target_id, f"Mill {text}", "place", "", chunk_id),
        ),
        (RelationMention(source_id, target_id, f"relation {text}", 1.5, chunk_id),),
    )
    await store.upsert_document(kb, graph, [axis(0)], {source_id: axis(1), target_id: axis(2)})

    doc = await store.get_document(kb, doc_id)
    assert doc is not None
    assert (doc.doc_id, doc.title, doc.source) == (doc_id, f"title {text}", f"source {text}")
    assert doc.metadata == {text: text, "nested": [text, {"k": text}]}
    assert [d.doc_id for d in await store.find_documents_by_source(kb, f"source {text}")] == [doc_id]
    [hit] = await store.get_chunks(kb, [chunk_id])
    assert (hit.chunk_id, hit.doc_id, hit.text, hit.title) == (chunk_id, doc_id, f"apple {text}", f"title {text}")
    entity = (await store.get_entities(kb, [source_id]))[0]
    merged = merge_entity([graph.entity_mentions[0]])  # types are lower-cased, long descriptions cut
    assert (entity.name, entity.type, entity.description) == (merged.name, merged.type, merged.description)
    assert entity.name == f"Apple {text}".strip()
    [relation] = await store.relations_of(kb, [source_id], 10)
    assert relation.description == merge_relation(graph.relation_mentions).description
    assert relation.chunk_ids == (chunk_id,)
    assert await store.entities_in_chunks(kb, [chunk_id]) == {chunk_id: sorted([source_id, target_id])}
    assert await store.chunks_of_entities(kb, [target_id], 5) == {target_id: [chunk_id]}

    assert [h.chunk_id for h in await store.search_chunks_fulltext(kb, f"apple {text}", 5)] == [chunk_id]
    assert [h.chunk_id for h in await store.search_chunks_vector(kb, axis(0), 5)] == [chunk_id]
    assert source_id in {h.entity.entity_id for h in await store.search_entities_fulltext(kb, f"apple {text}", 5)}
    assert (await store.search_entities_vector(kb, axis(1), 1))[0].entity.entity_id == source_id
    assert await store.search_chunks_fulltext("kb", f"apple {text}", 5) == []  # another KB sees nothing

    community = CommunityRecord(f"community {text}", 0, f"title {text}", f"summary {text}", 1.0, (source_id,))
    await store.replace_communities(kb, [community], {community.community_id: axis(3)})
    assert await store.list_communities(kb) == [community]
    assert (await store.search_communities(kb, axis(3), None, 1))[0].community == community

    registry = KnowledgeBase("kb", text, (text, "plain"), text, text, True, (text,), text)
    assert await store.create_knowledge_base(registry)
    assert await store.list_knowledge_bases() == [registry]
    assert await store.delete_document(kb, doc_id) is True
    assert (await store.counts(kb)).documents == 0


def test_lucene_query_quotes_every_term_and_requires_the_kb() -> None:
    query = lucene_query("orchard", 'apple* OR "mill" NOT (yeast)^3 kbt:x')
    assert query is not None
    assert query.startswith("+kbt:kb") and query.count("+") == 2
    assert 'terms:"apple"' in query and 'terms:"mill"' in query and 'terms:"yeast"' in query
    assert lucene_query("orchard", "the and of") is None  # stopwords only: nothing to search for


# -- concurrent writers ---------------------------------------------------------------------------------------


def shared_document(index: int) -> DocumentGraph:
    """Documents that all mention Apple and Mill and relate them: concurrent writers touch the same nodes."""
    doc_id = f"shared-{index}"
    chunk = ChunkRecord(f"{doc_id}-c0", doc_id, 0, f"Apple and mill, part {index}.", 0, 10)
    mentions = (
        EntityMention("kb-apple", "Apple", "fruit", f"Apple {index}.", chunk.chunk_id),
        EntityMention("kb-mill", "Mill", "place", f"Mill {index}.", chunk.chunk_id),
    )
    relation = RelationMention("kb-apple", "kb-mill", f"pressed {index}", 1.0, chunk.chunk_id)
    return DocumentGraph(DocumentRecord(doc_id, f"Shared {index}"), (chunk,), mentions, (relation,))


async def test_concurrent_writes_lose_no_mention(store: Neo4jGraphStore) -> None:
    writers = 6
    vectors = {"kb-apple": axis(0), "kb-mill": axis(1)}
    await asyncio.gather(*(store.upsert_document("kb", shared_document(i), [axis(2)], vectors) for i in range(writers)))
    # The same document written by several writers at once ends up written once.
    await asyncio.gather(*(store.upsert_document("kb", shared_document(0), [axis(2)], vectors) for _ in range(3)))
    apple = (await store.get_entities("kb", ["kb-apple"]))[0]
    assert apple.mention_count == writers
    assert set(apple.description.split("\n")) == {f"Apple {i}." for i in range(writers)}
    [relation] = await store.relations_of("kb", ["kb-apple"], 5)
    assert relation.weight == writers
    assert len(relation.chunk_ids) == writers
    assert await store.counts("kb") == GraphCounts(documents=writers, chunks=writers, entities=2, relations=1)
    await asyncio.gather(*(store.delete_document("kb", f"shared-{i}") for i in range(1, writers)))
    [relation] = await store.relations_of("kb", ["kb-apple"], 5)
    assert (relation.weight, relation.chunk_ids) == (1.0, ("shared-0-c0",))


# -- vectors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exact_scan_max", [2, 300])  # a KB counts as large / small
async def test_vector_search_agrees_with_an_exact_ranking(neo4j_server: Neo4jServer, exact_scan_max: int) -> None:
    store = await open_test_store(neo4j_server, exact_scan_max=exact_scan_max)
    try:
        assert store.vector_index_dimensions["graphrag_chunk_embedding"] == DIM
        await store.delete_everything()
        rng = np.random.default_rng(7)
        stored: dict[str, Vector] = {}
        for i in range(12):
            stored[f"d{i}"] = rng.standard_normal(DIM).astype(np.float32)
            await store.upsert_document("big", simple_document("big", f"d{i}", f"text {i}"), [stored[f"d{i}"]], {})
        await store.upsert_document("tiny", simple_document("tiny", "t0", "tiny"), [axis(0)], {})
        for query in (axis(0), axis(3), rng.standard_normal(DIM).astype(np.float32)):
            cosine = {d: float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)) for d, v in stored.items()}
            expected = sorted(cosine, key=lambda d: -cosine[d])[:5]
            hits = await store.search_chunks_vector("big", query, 5)
            assert [h.doc_id for h in hits] == expected
            assert [h.score for h in hits] == pytest.approx([cosine[d] for d in expected], abs=1e-5)
        # A KB with fewer vectors than asked for: the index's answer is short, the scan still finds all of them.
        assert [h.doc_id for h in await store.search_chunks_vector("tiny", axis(0), 5)] == ["t0"]
    finally:
        await store.close()


@asynccontextmanager
async def _emptied_store(server: Neo4jServer, **options: Any) -> AsyncIterator[Neo4jGraphStore]:
    """A store opened with `options` on a database emptied of graph nodes, closed afterwards."""
    store = await open_test_store(server, **options)
    try:
        await store.delete_everything()
        yield store
    finally:
        await store.close()


async def test_a_bulk_load_suspends_the_vector_indexes_and_builds_them_again(neo4j_server: Neo4jServer) -> None:
    async with _emptied_store(neo4j_server, exact_scan_max=2, bulk_load_min_documents=6) as store:
        rng = np.random.default_rng(11)
        vectors = {f"d{i}-c0": rng.standard_normal(DIM).astype(np.float32) for i in range(8)}
        query = rng.standard_normal(DIM).astype(np.float32)
        cosine = {c: float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)) for c, v in vectors.items()}
        exact = sorted(cosine, key=lambda c: -cosine[c])[:5]
        before = await _vector_indexes(neo4j_server)
        assert set(before) == VECTOR_INDEXES

        async with store.bulk_load(8) as load:
            assert await _vector_indexes(neo4j_server) == {}  # suspended
            for i, vector in enumerate(vectors.values()):
                await store.upsert_document("kb", simple_document("kb", f"d{i}", f"text {i}"), [vector], {})
            # 8 vectors are a large set here (exact_scan_max=2), so the index is asked first, fails, and the
            # exact scan answers.
            meanwhile = [h.chunk_id for h in await store.search_chunks_vector("kb", query, 5)]
            await load.documents_written()
            # The chunk and entity indexes are being built; the community one waits for the refresh.
            assert set(await _vector_indexes(neo4j_server)) == VECTOR_INDEXES - {"graphrag_community_embedding"}
        after = await _vector_indexes(neo4j_server)

        assert set(after) == VECTOR_INDEXES
        assert set(after.values()) == {"ONLINE"}  # the exit waited for them
        assert store.vector_index_dimensions["graphrag_chunk_embedding"] == DIM
        assert meanwhile == exact
        assert [h.chunk_id for h in await store.search_chunks_vector("kb", query, 5)] == exact  # by the index


async def test_a_small_load_keeps_the_vector_indexes(neo4j_server: Neo4jServer) -> None:
    async with _emptied_store(neo4j_server, bulk_load_min_documents=2) as store:
        for i in range(8):
            await store.upsert_document("kb", simple_document("kb", f"d{i}", f"text {i}"), [axis(i)], {})
        before = await _vector_indexes(neo4j_server)
        async with store.bulk_load(1):  # fewer documents than the store's minimum
            assert await _vector_indexes(neo4j_server) == before
        store._bulk_load_min_documents = 1
        async with store.bulk_load(1):  # 1 document against 8 chunk vectors: under a quarter
            assert await _vector_indexes(neo4j_server) == before
        async with store.bulk_load(2):
            assert await _vector_indexes(neo4j_server) == {}
        assert set(await _vector_indexes(neo4j_server)) == VECTOR_INDEXES


async def test_a_failed_load_builds_the_vector_indexes_again(neo4j_server: Neo4jServer) -> None:
    async with _emptied_store(neo4j_server, bulk_load_min_documents=1) as store:
        with pytest.raises(RuntimeError, match="the load failed"):
            async with store.bulk_load(1):
                assert await _vector_indexes(neo4j_server) == {}
                raise RuntimeError("the load failed")
        found = await _vector_indexes(neo4j_server)
        assert set(found) == VECTOR_INDEXES and set(found.values()) == {"ONLINE"}


async def test_vector_indexes_a_load_could_not_build_are_built_at_the_next_open(
    neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with _emptied_store(neo4j_server, bulk_load_min_documents=1) as store:

        async def refuse(dimensions: dict[str, int]) -> None:
            raise StoreUnavailable("the build was refused")

        monkeypatch.setattr(store, "_build_vector_indexes", refuse)
        async with store.bulk_load(1):
            pass  # the exit logs the failure instead of raising it: the documents are written
        assert "the build was refused" in caplog.text
        assert await _vector_indexes(neo4j_server) == {}
    reopened = await open_test_store(neo4j_server)
    try:
        assert set(await _vector_indexes(neo4j_server)) == VECTOR_INDEXES
    finally:
        await reopened.close()


async def _vector_indexes(server: Neo4jServer) -> dict[str, str]:
    """Each vector index's state."""
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        found = await driver.execute_query("SHOW VECTOR INDEXES YIELD name, state RETURN name, state")
    return {str(r["name"]): str(r["state"]) for r in found.records}


def test_a_batch_is_written_in_groups_of_a_bounded_number_of_chunks() -> None:
    def params(doc_id: str, chunks: int) -> DocumentParams:
        written = document_params("kb", simple_document("kb", doc_id, "text"), [axis(0)], {})
        return replace(written, chunks=[{}] * chunks)

    batch = [params("a", 3), params("b", 4), params("c", 9), params("d", 1), params("e", 2)]
    groups = _groups_of_chunks(batch, 8)
    assert [[p.uid for p in group] for group in groups] == [
        [batch[0].uid, batch[1].uid],  # 7 chunks
        [batch[2].uid],  # 9: over the bound, alone
        [batch[3].uid, batch[4].uid],
    ]
    assert _groups_of_chunks([], 8) == []


async def test_one_dimension_per_kb(store: Neo4jGraphStore) -> None:
    await store.upsert_document("kb", simple_document("kb", "d0", "first"), [axis(0)], {})
    longer = np.ones(DIM + 1, dtype=np.float32)
    with pytest.raises(InvalidRequest, match="dimension"):
        await store.upsert_document("kb", simple_document("kb", "d1", "second"), [longer], {})
    with pytest.raises(InvalidRequest, match="dimension"):
        await store.search_chunks_vector("kb", longer, 5)
    with pytest.raises(InvalidRequest):
        await store.upsert_document("kb", simple_document("kb", "d2", "nan"), [np.full(DIM, np.nan)], {})
    # In one batch, each document is checked against the KB and the documents before it.
    mixed = [
        DocumentWrite(simple_document("kb", "d3", "third"), [axis(1)], {}),
        DocumentWrite(simple_document("kb", "d4", "fourth"), [longer], {}),
    ]
    with pytest.raises(InvalidRequest, match="dimension"):
        await store.upsert_documents("kb", mixed)
    assert (await store.counts("kb")).documents == 1
    # A document's own chunks, about to be replaced, do not count: the KB's only document may change dimension.
    await store.upsert_document("kb", simple_document("kb", "d0", "first again"), [longer], {})
    assert (await store.chunk_embeddings("kb", ["d0-c0"]))["d0-c0"].shape == (DIM + 1,)


# -- community refresh in batches ---------------------------------------------------------------------------------

TINY_BATCHES = BatchLimits(communities=2, links=3)
NAMES = [f"E{i}" for i in range(12)]


def clustering(prefix: str, groups: list[list[int]], top_prefix: str = "") -> list[CommunityRecord]:
    """Communities over the entities NAMES (`kb-E<i>`): one top community over all, a child per group."""
    top_prefix = top_prefix or prefix
    members = tuple(sorted(f"kb-{n}" for n in NAMES))
    top = CommunityRecord(f"{top_prefix}-top", 0, f"{top_prefix} top", "all", 9.0, members)
    children = [
        CommunityRecord(
            f"{prefix}-{i}",
            1,
            f"{prefix} group {i}",
            f"summary {i}",
            float(len(group)),
            tuple(sorted(f"kb-{NAMES[m]}" for m in group)),
            top.community_id,
        )
        for i, group in enumerate(groups)
    ]
    return [top, *children]


@pytest.fixture
async def batched(neo4j_server: Neo4jServer) -> AsyncIterator[Neo4jGraphStore]:
    opened = await open_test_store(neo4j_server, community_batches=TINY_BATCHES)
    await opened.delete_everything()
    for index, name in enumerate(NAMES):
        await opened.upsert_document("kb", simple_document("kb", f"d{index}", f"{name} text", name), [axis(0)], {})
    yield opened
    await opened.close()


def by_id(communities: list[CommunityRecord]) -> dict[str, CommunityRecord]:
    return {c.community_id: c for c in communities}


async def test_a_large_refresh_in_batches_ends_in_exactly_the_new_set(
    batched: Neo4jGraphStore, caplog: pytest.LogCaptureFixture
) -> None:
    first = clustering("a", [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
    vectors = {c.community_id: axis(i) for i, c in enumerate(first)}
    await batched.replace_communities("kb", first, vectors)
    assert by_id(await batched.list_communities("kb")) == by_id(first)

    # Re-clustered: every old community but the top is dropped (more than one batch of them), members move.
    caplog.set_level("INFO", logger="backend.infrastructure.graph_store.neo4j.community_refresh")
    second = clustering("b", [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]], top_prefix="a")  # the top is kept
    await batched.replace_communities("kb", second, {c.community_id: axis(5) for c in second[1:]})
    assert "in " in caplog.text and "batches" in caplog.text  # it did take the batched path
    assert by_id(await batched.list_communities("kb")) == by_id(second)
    assert await batched.communities_of("kb", ["kb-E5"]) == [second[0], second[2]]
    hits = await batched.search_communities("kb", axis(0), 0, 5)
    assert [h.community for h in hits] == [second[0]] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert (await batched.counts("kb")).communities == 5


async def test_a_newer_refresh_stops_an_older_one_between_batches(neo4j_server: Neo4jServer) -> None:
    older_set = clustering("old", [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]])
    newer_set = clustering("new", [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])
    store = await open_test_store(neo4j_server, community_batches=TINY_BATCHES)
    try:
        await store.delete_everything()
        for index, name in enumerate(NAMES):
            await store.upsert_document("kb", simple_document("kb", f"d{index}", f"{name} text", name), [axis(0)], {})
        await store.replace_communities("kb", clustering("seed", [[i] for i in range(12)]), {})
        transactions = 0
        real_write = store._write

        async def write_then_interrupt(operation: str, work: Any) -> Any:
            # After the older refresh's third transaction, a newer refresh of the same KB runs to completion.
            nonlocal transactions
            transactions += 1
            result = await real_write(operation, work)
            if transactions == 3:
                store._write = real_write  # type: ignore[method-assign]
                await store.replace_communities("kb", newer_set, {})
            return result

        store._write = write_then_interrupt  # type: ignore[method-assign]
        await store.replace_communities("kb", older_set, {})
        assert by_id(await store.list_communities("kb")) == by_id(newer_set)
        assert (await store.counts("kb")).communities == len(newer_set)
    finally:
        await store.close()


async def test_a_refresh_with_vectors_of_another_dimension_writes_nothing(batched: Neo4jGraphStore) -> None:
    first = clustering("a", [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])
    await batched.replace_communities("kb", first, {first[0].community_id: axis(0)})
    changed = clustering("b", [[0], [1]], top_prefix="a")  # the top keeps its DIM vector; the new ones get 3
    with pytest.raises(InvalidRequest, match="different dimensions"):
        await batched.replace_communities("kb", changed, {c.community_id: [1.0, 0.0, 0.0] for c in changed[1:]})
    assert by_id(await batched.list_communities("kb")) == by_id(first)


# -- opening while the server is down --------------------------------------------------------------------------


async def test_a_lazy_store_opens_while_neo4j_is_down_and_creates_its_schema_when_it_answers(
    neo4j_server: Neo4jServer,
) -> None:
    real = urlsplit(neo4j_server.uri)
    forwarder = TcpForwarder(closed_port(), real.hostname or "127.0.0.1", real.port or 7687)
    uri = f"{real.scheme}://127.0.0.1:{forwarder.port}"
    with pytest.raises(StoreUnavailable):  # not lazy: the server must answer at once
        await Neo4jGraphStore.open(uri, neo4j_server.user, neo4j_server.password, connection_timeout_s=1)
    store = await Neo4jGraphStore.open(
        uri,
        neo4j_server.user,
        neo4j_server.password,
        embedding_dimension=TEST_EMBEDDING_DIMENSION,
        connection_timeout_s=1,
        max_retry_time_s=1,
        lazy=True,
    )
    try:
        with pytest.raises(StoreUnavailable):
            await store.ping()
        with pytest.raises(StoreUnavailable):
            await store.list_knowledge_bases()
        await forwarder.start()  # Neo4j is back
        await store.ping()
        assert store.vector_index_dimensions  # the schema was created on the way
        await store.delete_everything()
        await store.upsert_document("kb", simple_document("kb", "d1", "apple harvest"), [axis(0)], {})
        assert [h.chunk_id for h in await store.search_chunks_fulltext("kb", "harvest", 3)] == ["d1-c0"]
    finally:
        await store.close()
        await forwarder.stop()
