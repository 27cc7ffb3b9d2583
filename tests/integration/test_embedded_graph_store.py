"""What only the embedded graph store does: its file, its threads, its caches (the port's rules are in
tests/contract/test_graph_store.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.domain import ids
from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.domain.graph import CommunityRecord
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from backend.infrastructure.graph_store.embedded.reads import fulltext_match_expression
from tests.contract.test_graph_store import KB, ChunkSpec, Doc, Mention, axis, bees, build, cider, eid, write

SLOW_SQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000000) SELECT count(*) FROM c"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedGraphStore]:
    opened = await EmbeddedGraphStore.open(tmp_path / "data" / "graph.db")
    yield opened
    await opened.close()


# -- cancellation --------------------------------------------------------------------------------------------


async def test_cancelling_a_running_query_interrupts_it(store: EmbeddedGraphStore) -> None:
    started, ended = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def slow(raw: sqlite3.Connection) -> object:
        started.set()
        try:
            return raw.execute(SLOW_SQL).fetchone()
        except BaseException as exc:
            outcome.append(exc)
            raise
        finally:
            ended.set()

    task = asyncio.create_task(store._read("slow test query", slow))
    assert await asyncio.to_thread(started.wait, 5)
    await asyncio.sleep(0.2)
    assert not task.done()
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - cancelled_at < 2.0
    assert ended.is_set()  # the worker thread had stopped when the await returned
    assert isinstance(outcome[0], sqlite3.OperationalError) and "interrupt" in str(outcome[0])
    await store.ping()  # the connections are usable again
    assert (await store.counts(KB)).chunks == 0


def huge_document(chunks: int) -> Doc:
    apple = Mention("Apple", "fruit", "")
    return build(
        KB, "Huge", [ChunkSpec(f"Chunk {i} about cider and apples.", axis(i % 8), (apple,)) for i in range(chunks)]
    )


async def test_a_cancelled_write_is_rolled_back(store: EmbeddedGraphStore) -> None:
    huge = huge_document(40_000)
    task = asyncio.create_task(write(store, huge))
    # The rows are prepared in a thread first; the store has no event to wait on, so poll its lock.
    while not store._write_lock.locked():  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.02)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.get_document(KB, huge.doc_id) is None
    assert (await store.counts(KB)).chunks == 0
    assert await store.search_chunks_fulltext(KB, "cider", 5) == []
    await write(store, bees())  # the writer still works
    assert (await store.counts(KB)).documents == 1


# -- one file, two instances ---------------------------------------------------------------------------------


async def test_the_vector_caches_see_writes_of_another_instance(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = await EmbeddedGraphStore.open(path), await EmbeddedGraphStore.open(path)
    try:
        await write(first, bees())
        community = CommunityRecord(ids.community_id(KB, 0, ["x"]), 0, "Bees", "", 1.0, ())
        await first.replace_communities(KB, [community], {community.community_id: axis(4)})
        # Cache every matrix in the first instance.
        assert [h.doc_id for h in await first.search_chunks_vector(KB, axis(0), 10)] == [bees().doc_id] * 2
        assert eid(KB, "Yeast") not in {h.entity.entity_id for h in await first.search_entities_vector(KB, axis(2), 10)}
        assert len(await first.search_communities(KB, axis(0), None, 10)) == 1

        await write(second, cider())
        other = replace(community, community_id="cider-community", title="Cider")
        await second.replace_communities(KB, [community, other], {other.community_id: axis(0)})

        assert (await first.search_chunks_vector(KB, axis(0), 1))[0].chunk_id == cider().chunk(0)
        assert (await first.search_entities_vector(KB, axis(2), 1))[0].entity.entity_id == eid(KB, "Yeast")
        assert [h.community.title for h in await first.search_communities(KB, axis(0), None, 10)] == ["Cider", "Bees"]
    finally:
        await first.close()
        await second.close()


async def test_the_community_cache_sees_members_another_instance_removed(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = await EmbeddedGraphStore.open(path), await EmbeddedGraphStore.open(path)
    try:
        await write(first, cider(), bees())
        names = ["Apple", "Yeast", "Bee"]
        community = CommunityRecord(ids.community_id(KB, 0, names), 0, "Mixed", "", 1.0, ())
        await first.replace_communities(KB, [replace(community, entity_ids=tuple(eid(KB, n) for n in names))], {})
        # Cached by the first instance.
        assert [c.community_id for c in await first.communities_of(KB, [eid(KB, "Yeast")])] == [community.community_id]

        assert await second.delete_document(KB, cider().doc_id)  # Yeast was only in cider: its membership goes

        assert await first.communities_of(KB, [eid(KB, "Yeast")]) == []
        (listed,) = await first.list_communities(KB)
        assert eid(KB, "Yeast") not in listed.entity_ids
        assert eid(KB, "Bee") in listed.entity_ids
    finally:
        await first.close()
        await second.close()


# -- embedded specifics --------------------------------------------------------------------------------------


async def test_document_titles_are_searchable_with_their_chunks(store: EmbeddedGraphStore) -> None:
    await write(store, cider(), bees())
    hits = await store.search_chunks_fulltext(KB, "making", 10)
    assert {h.chunk_id for h in hits} == {cider().chunk(0), cider().chunk(1)}


def test_match_expression_quotes_every_term() -> None:
    assert fulltext_match_expression('" OR 1=1 --') == '"1"'
    assert fulltext_match_expression("Cider NEAR(bees)") == '"cider" OR "near" OR "bees"'
    assert fulltext_match_expression("o'brien") == '"o\'brien"'
    assert fulltext_match_expression("the of and") is None
    assert fulltext_match_expression("苹果酒是什么？") == '"苹果酒"'  # jieba words, question words dropped


async def test_embedding_dimensions_must_match_within_a_kb(store: EmbeddedGraphStore) -> None:
    await write(store, cider())
    wide = build(KB, "Wide", [ChunkSpec("Five dimensions.", np.ones(5, dtype=np.float32))])
    with pytest.raises(InvalidRequest, match="re-index"):
        await write(store, wide)
    with pytest.raises(InvalidRequest, match="re-index"):
        await store.search_chunks_vector(KB, np.ones(5, dtype=np.float32), 3)
    await write(store, replace(wide, kb="wide_kb"))  # another KB may use another model
    assert (await store.counts("wide_kb")).chunks == 1
    assert (await store.counts(KB)).documents == 1


async def test_non_finite_embeddings_are_rejected(store: EmbeddedGraphStore) -> None:
    bad = build(KB, "Bad", [ChunkSpec("x", np.array([np.nan, 1, 0, 0], dtype=np.float32))])
    with pytest.raises(InvalidRequest, match="non-finite"):
        await write(store, bad)
    bad_entity = build(KB, "Bad entity", [ChunkSpec("x", axis(0), (Mention("X", "", ""),))])
    bad_entity = replace(bad_entity, entity_vectors={eid(KB, "X"): np.array([np.inf] * 8, dtype=np.float32)})
    with pytest.raises(InvalidRequest, match="non-finite"):
        await write(store, bad_entity)
    assert (await store.counts(KB)).documents == 0


async def test_sqlite_failures_become_store_unavailable_and_change_nothing(store: EmbeddedGraphStore) -> None:
    await write(store, cider())
    thief = build(KB, "Thief", [ChunkSpec("Takes another document's chunk id.", axis(1))])
    stolen = replace(thief.graph.chunks[0], chunk_id=cider().chunk(0))
    thief = replace(thief, graph=replace(thief.graph, chunks=(stolen,)))
    with pytest.raises(StoreUnavailable, match="upsert_document failed"):
        await write(store, thief)
    assert await store.get_document(KB, thief.doc_id) is None
    assert (await store.get_chunks(KB, [cider().chunk(0)]))[0].doc_id == cider().doc_id
    assert (await store.counts(KB)).chunks == 2


async def test_unopenable_files_raise_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open"):
        await EmbeddedGraphStore.open(tmp_path)  # a directory
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot open"):
        await EmbeddedGraphStore.open(garbage)


async def test_a_file_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    await (await EmbeddedGraphStore.open(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE store_meta SET value = '999' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(StoreUnavailable, match="newer"):
        await EmbeddedGraphStore.open(path)


async def test_a_closed_store_says_so(tmp_path: Path) -> None:
    closed = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    await closed.close()
    await closed.close()  # idempotent
    with pytest.raises(StoreUnavailable, match="closed"):
        await closed.search_chunks_fulltext(KB, "cider", 5)
    with pytest.raises(StoreUnavailable, match="closed"):
        await write(closed, bees())
    with pytest.raises(StoreUnavailable, match="closed"):
        await closed.ping()
