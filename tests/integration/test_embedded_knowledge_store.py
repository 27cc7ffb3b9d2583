"""The embedded SQLite knowledge store: documents, fulltext and vector search, isolation, safety."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.graphrag_agent.chunking import TextChunk
from backend.infrastructure.knowledge.embedded_store import (
    EmbeddedKnowledgeStore,
    chunk_id_for,
    fulltext_match_expression,
)

Vector = npt.NDArray[np.float32]


def vec(*values: float) -> Vector:
    array = np.asarray(values, dtype=np.float32)
    return array / np.linalg.norm(array)


def chunks(*items: tuple[str, Vector]) -> list[tuple[TextChunk, Vector]]:
    return [(TextChunk(i, text, 0, len(text)), embedding) for i, (text, embedding) in enumerate(items)]


CIDER = chunks(
    ("Cider apples are pressed in October on the rack-and-cloth press.", vec(1, 0, 0, 0)),
    ("The juice ferments with wild yeast in oak barrels.", vec(0.8, 0.6, 0, 0)),
)
BEES = chunks(("Thirty hives of bees pollinate the blossom in May.", vec(0, 0, 1, 0)))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedKnowledgeStore]:
    opened = await EmbeddedKnowledgeStore.open(tmp_path / "data" / "knowledge.db")
    yield opened
    await opened.close()


@pytest.fixture
async def filled(store: EmbeddedKnowledgeStore) -> EmbeddedKnowledgeStore:
    await store.upsert_document("orchard", "doc-cider", "Making cider", {"source": "cider.md"}, CIDER)
    await store.upsert_document("orchard", "doc-bees", "The bees", {"source": "bees.md"}, BEES)
    return store


async def test_documents_are_stored_listed_and_counted(filled: EmbeddedKnowledgeStore) -> None:
    documents = await filled.list_documents("orchard")
    assert [(d.doc_id, d.title, d.chunk_count) for d in documents] == [
        ("doc-cider", "Making cider", 2),
        ("doc-bees", "The bees", 1),
    ]
    assert documents[0].metadata == {"source": "cider.md"}
    assert documents[0].created_at
    assert await filled.count_chunks("orchard") == 3
    assert await filled.has_document("orchard", "doc-bees")
    assert not await filled.has_document("orchard", "doc-nope")
    await filled.ping()


async def test_fulltext_search_ranks_the_matching_chunk_first(filled: EmbeddedKnowledgeStore) -> None:
    hits = await filled.search_chunks_fulltext("orchard", "When are the apples pressed?", 10)
    assert hits[0].chunk_id == chunk_id_for("doc-cider", 0)
    assert hits[0].doc_id == "doc-cider"
    assert hits[0].title == "Making cider"
    assert hits[0].ordinal == 0
    assert hits[0].text == CIDER[0][0].text
    assert hits[0].score > 0
    assert all(hit.doc_id != "doc-bees" for hit in hits)


async def test_fulltext_search_matches_document_titles(filled: EmbeddedKnowledgeStore) -> None:
    hits = await filled.search_chunks_fulltext("orchard", "making", 10)
    assert {hit.chunk_id for hit in hits} == {chunk_id_for("doc-cider", 0), chunk_id_for("doc-cider", 1)}


async def test_fulltext_limit_is_respected(filled: EmbeddedKnowledgeStore) -> None:
    assert len(await filled.search_chunks_fulltext("orchard", "cider bees juice", 1)) == 1
    assert await filled.search_chunks_fulltext("orchard", "cider", 0) == []


async def test_vector_search_orders_by_cosine(filled: EmbeddedKnowledgeStore) -> None:
    hits = await filled.search_chunks_vector("orchard", vec(1, 0.1, 0, 0), 10)
    assert [hit.chunk_id for hit in hits] == [
        chunk_id_for("doc-cider", 0),
        chunk_id_for("doc-cider", 1),
        chunk_id_for("doc-bees", 0),
    ]
    query = vec(1, 0.1, 0, 0)
    assert hits[0].score == pytest.approx(float(query @ vec(1, 0, 0, 0)), abs=1e-6)
    assert hits[2].score == pytest.approx(0.0, abs=1e-6)
    assert hits[1].title == "Making cider"
    assert len(await filled.search_chunks_vector("orchard", query, 2)) == 2


async def test_vector_query_is_normalised_and_zero_query_finds_nothing(filled: EmbeddedKnowledgeStore) -> None:
    scaled = await filled.search_chunks_vector("orchard", np.asarray([0, 0, 5, 0], dtype=np.float32), 1)
    assert scaled[0].doc_id == "doc-bees"
    assert scaled[0].score == pytest.approx(1.0, abs=1e-6)
    assert await filled.search_chunks_vector("orchard", np.zeros(4, dtype=np.float32), 5) == []


async def test_knowledge_bases_are_isolated(filled: EmbeddedKnowledgeStore) -> None:
    await filled.upsert_document("other", "doc-x", "Other", {}, chunks(("Cider from elsewhere.", vec(1, 0, 0, 0))))
    orchard_hits = await filled.search_chunks_fulltext("orchard", "cider", 10)
    other_hits = await filled.search_chunks_fulltext("other", "cider", 10)
    assert {h.doc_id for h in orchard_hits} == {"doc-cider"}
    assert {h.doc_id for h in other_hits} == {"doc-x"}
    assert {h.doc_id for h in await filled.search_chunks_vector("other", vec(1, 0, 0, 0), 10)} == {"doc-x"}
    assert [d.doc_id for d in await filled.list_documents("other")] == ["doc-x"]
    assert await filled.count_chunks("other") == 1
    assert not await filled.has_document("other", "doc-cider")
    assert await filled.search_chunks_fulltext("empty", "cider", 10) == []
    assert await filled.search_chunks_vector("empty", vec(1, 0, 0, 0), 10) == []


@pytest.mark.parametrize("kb", ["orchard' OR '1'='1", "orchard; DROP TABLE chunks", "%", "*", ""])
async def test_sql_looking_kb_names_match_nothing(filled: EmbeddedKnowledgeStore, kb: str) -> None:
    assert await filled.search_chunks_fulltext(kb, "cider", 10) == []
    assert await filled.search_chunks_vector(kb, vec(1, 0, 0, 0), 10) == []
    assert await filled.list_documents(kb) == []
    assert await filled.count_chunks("orchard") == 3


async def test_delete_removes_a_document_from_everything(filled: EmbeddedKnowledgeStore) -> None:
    before = await filled.search_chunks_vector("orchard", vec(1, 0, 0, 0), 10)  # warms the vector cache
    assert len(before) == 3
    assert await filled.delete_document("orchard", "doc-cider") is True
    assert await filled.delete_document("orchard", "doc-cider") is False
    assert await filled.search_chunks_fulltext("orchard", "cider pressed juice", 10) == []
    assert [h.doc_id for h in await filled.search_chunks_vector("orchard", vec(1, 0, 0, 0), 10)] == ["doc-bees"]
    assert [d.doc_id for d in await filled.list_documents("orchard")] == ["doc-bees"]
    assert await filled.count_chunks("orchard") == 1


async def test_upserting_again_replaces_the_chunks(filled: EmbeddedKnowledgeStore) -> None:
    created = (await filled.list_documents("orchard"))[0].created_at
    replacement = chunks(("Perry is made from pears.", vec(0, 1, 0, 0)))
    written = await filled.upsert_document("orchard", "doc-cider", "Making perry", {"v": 2}, replacement)
    assert written == 1
    assert await filled.search_chunks_fulltext("orchard", "barrels", 10) == []
    hits = await filled.search_chunks_fulltext("orchard", "pears", 10)
    assert [(h.chunk_id, h.title) for h in hits] == [(chunk_id_for("doc-cider", 0), "Making perry")]
    documents = {d.doc_id: d for d in await filled.list_documents("orchard")}
    assert documents["doc-cider"].chunk_count == 1
    assert documents["doc-cider"].metadata == {"v": 2}
    assert documents["doc-cider"].created_at == created


@pytest.mark.parametrize(
    "query",
    [
        '" OR 1=1 --',
        "NEAR(",
        "NEAR(cider bees, 2)",
        "*",
        "cider*",
        '"',
        '"""',
        "'",
        "title:cider",
        "terms : cider",
        "{terms kb}: cider",
        "^cider",
        "(cider OR",
        "AND OR NOT",
        "'; DROP TABLE chunks; --",
        "cider\x00bees",
        "🍎🍏",
        "cider " * 500,
        "-cider +bees",
    ],
)
async def test_hostile_fulltext_queries_never_raise(filled: EmbeddedKnowledgeStore, query: str) -> None:
    hits = await filled.search_chunks_fulltext("orchard", query, 10)
    assert {hit.doc_id for hit in hits} <= {"doc-cider", "doc-bees"}
    assert await filled.count_chunks("orchard") == 3


async def test_fts_operators_are_plain_words(filled: EmbeddedKnowledgeStore) -> None:
    # "NOT" would exclude the bees in FTS syntax; quoted and OR-ed it is just a (stop) word.
    hits = await filled.search_chunks_fulltext("orchard", "cider NOT bees", 10)
    assert {hit.doc_id for hit in hits} == {"doc-cider", "doc-bees"}
    assert await filled.search_chunks_fulltext("orchard", "* NEAR( ^ :", 10) == []


def test_match_expression_quotes_every_term() -> None:
    assert fulltext_match_expression('" OR 1=1 --') == '"1"'
    assert fulltext_match_expression("Cider NEAR(bees)") == '"cider" OR "near" OR "bees"'
    assert fulltext_match_expression("o'brien") == '"o\'brien"'
    assert fulltext_match_expression("the of and") is None
    assert fulltext_match_expression("苹果酒") == '"苹" OR "果" OR "酒" OR "苹果" OR "果酒"'


async def test_chinese_text_is_searchable(store: EmbeddedKnowledgeStore) -> None:
    await store.upsert_document(
        "zh", "doc-zh", "果园历史", {}, chunks(("苹果酒在石头磨坊里酿造。磨坊建于一九五八年。", vec(1, 1, 0, 0)))
    )
    await store.upsert_document("zh", "doc-bees", "蜜蜂", {}, chunks(("蜜蜂在五月为花授粉。", vec(0, 0, 1, 1))))
    assert (await store.search_chunks_fulltext("zh", "苹果酒在哪里酿造？", 10))[0].doc_id == "doc-zh"
    assert [h.doc_id for h in await store.search_chunks_fulltext("zh", "磨坊", 10)] == ["doc-zh"]
    assert [h.doc_id for h in await store.search_chunks_fulltext("zh", "授粉", 10)] == ["doc-bees"]
    assert await store.search_chunks_fulltext("zh", "香蕉", 10) == []


async def test_a_failed_write_leaves_the_previous_version_intact(filled: EmbeddedKnowledgeStore) -> None:
    broken = [
        (TextChunk(0, "Brand new text about perry.", 0, 27), vec(1, 0, 0, 0)),
        (TextChunk(0, "A second chunk with the same ordinal.", 0, 37), vec(1, 0, 0, 0)),
    ]
    with pytest.raises(StoreUnavailable, match="upsert_document failed"):
        await filled.upsert_document("orchard", "doc-cider", "Broken", {}, broken)
    assert await filled.search_chunks_fulltext("orchard", "perry", 10) == []
    documents = {d.doc_id: d for d in await filled.list_documents("orchard")}
    assert (documents["doc-cider"].title, documents["doc-cider"].chunk_count) == ("Making cider", 2)
    assert await filled.count_chunks("orchard") == 3


async def test_readers_never_see_a_half_written_document(store: EmbeddedKnowledgeStore) -> None:
    many = chunks(*[(f"Chunk number {i} about apples.", vec(1, i, 0, 0)) for i in range(300)])
    seen: set[int] = set()
    done = asyncio.Event()

    async def writer() -> None:
        for _ in range(5):
            await store.upsert_document("orchard", "big", "Big", {}, many)
            await store.delete_document("orchard", "big")
        done.set()

    async def reader() -> None:
        while not done.is_set():
            seen.update(d.chunk_count for d in await store.list_documents("orchard"))
            seen.add(await store.count_chunks("orchard"))
            seen.add(len(await store.search_chunks_vector("orchard", vec(1, 0, 0, 0), 1000)))

    await asyncio.gather(writer(), reader(), reader())
    assert seen <= {0, 300}
    assert 300 in seen or 0 in seen


SLOW_SQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000000) SELECT count(*) FROM c"


async def test_cancelling_a_running_query_interrupts_it(store: EmbeddedKnowledgeStore) -> None:
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
    assert ended.is_set()  # the worker thread had already stopped when the await returned
    assert isinstance(outcome[0], sqlite3.OperationalError)
    assert "interrupt" in str(outcome[0])
    await store.ping()  # the connection is usable again
    assert await store.count_chunks("orchard") == 0


async def test_cancelled_write_is_rolled_back(store: EmbeddedKnowledgeStore) -> None:
    many = chunks(*[(f"Chunk {i} about cider and apples and pears.", vec(1, i, 0, 0)) for i in range(50_000)])
    task = asyncio.create_task(store.upsert_document("orchard", "huge", "Huge", {}, many))
    await asyncio.sleep(0)  # the task runs until its transaction is in the worker thread
    assert store._write_lock.locked()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not await store.has_document("orchard", "huge")
    assert await store.count_chunks("orchard") == 0
    assert await store.search_chunks_fulltext("orchard", "cider", 5) == []
    await store.upsert_document("orchard", "doc-bees", "The bees", {}, BEES)  # the writer still works
    assert await store.count_chunks("orchard") == 1


async def test_vector_cache_sees_writes_from_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first = await EmbeddedKnowledgeStore.open(path)
    second = await EmbeddedKnowledgeStore.open(path)
    try:
        await first.upsert_document("orchard", "doc-bees", "The bees", {}, BEES)
        assert len(await first.search_chunks_vector("orchard", vec(1, 0, 0, 0), 10)) == 1  # cached now
        await second.upsert_document("orchard", "doc-cider", "Making cider", {}, CIDER)
        hits = await first.search_chunks_vector("orchard", vec(1, 0, 0, 0), 10)
        assert hits[0].doc_id == "doc-cider"
        assert len(hits) == 3
    finally:
        await first.close()
        await second.close()


async def test_data_survives_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "durable.db"
    first = await EmbeddedKnowledgeStore.open(path)
    await first.upsert_document("orchard", "doc-bees", "The bees", {"n": 1}, BEES)
    await first.close()
    again = await EmbeddedKnowledgeStore.open(path)
    try:
        assert [d.doc_id for d in await again.list_documents("orchard")] == ["doc-bees"]
        assert (await again.search_chunks_fulltext("orchard", "hives", 5))[0].doc_id == "doc-bees"
    finally:
        await again.close()


async def test_embedding_dimensions_must_match_within_a_kb(filled: EmbeddedKnowledgeStore) -> None:
    wide = chunks(("Five dimensions.", np.ones(5, dtype=np.float32) / np.sqrt(5)))
    with pytest.raises(InvalidRequest, match="re-index"):
        await filled.upsert_document("orchard", "doc-wide", "Wide", {}, wide)
    with pytest.raises(InvalidRequest, match="re-index"):
        await filled.search_chunks_vector("orchard", np.ones(5, dtype=np.float32), 3)
    await filled.upsert_document("wide_kb", "doc-wide", "Wide", {}, wide)  # another KB may differ
    assert await filled.count_chunks("wide_kb") == 1


async def test_non_finite_embeddings_are_rejected(store: EmbeddedKnowledgeStore) -> None:
    bad: Sequence[tuple[TextChunk, Vector]] = chunks(("x", np.array([np.nan, 1, 0, 0], dtype=np.float32)))
    with pytest.raises(InvalidRequest, match="non-finite"):
        await store.upsert_document("orchard", "doc", "Doc", {}, bad)
    assert await store.count_chunks("orchard") == 0


async def test_unopenable_files_raise_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open"):
        await EmbeddedKnowledgeStore.open(tmp_path)  # a directory
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot open"):
        await EmbeddedKnowledgeStore.open(garbage)


async def test_a_closed_store_says_so(tmp_path: Path) -> None:
    closed = await EmbeddedKnowledgeStore.open(tmp_path / "k.db")
    await closed.close()
    await closed.close()  # idempotent
    with pytest.raises(StoreUnavailable, match="closed"):
        await closed.search_chunks_fulltext("orchard", "cider", 5)
    with pytest.raises(StoreUnavailable, match="closed"):
        await closed.upsert_document("orchard", "d", "t", {}, BEES)
