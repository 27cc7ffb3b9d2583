"""SharedReads: identical reads inside one scope are done once, every caller gets its own copy, and nothing is
shared outside a scope or between scopes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from backend.graphrag_agent import text
from backend.graphrag_agent.agents.local_search import loose_overlap
from backend.graphrag_agent.ports import ChunkHit, GraphReader, TextEmbedder
from backend.graphrag_agent.shared_reads import SharedReads


class CountingReader:
    """The reads the tests use, each counted; a read waits for `gate` so that callers overlap."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.limits: list[int] = []

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        self.calls["fulltext"] += 1
        self.limits.append(limit)
        await self.gate.wait()
        if self.fail:
            raise ConnectionError("store down")
        return [ChunkHit(f"{kb}-{query}-{n}", "doc", "title", "text", n, 1.0 / (n + 1)) for n in range(limit)]

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        self.calls["entities_in_chunks"] += 1
        return {chunk_id: ["e1", "e2"] for chunk_id in chunk_ids}


class CountingEmbedder:
    dimension = 3

    def __init__(self) -> None:
        self.calls = 0

    def covers(self, text: str) -> bool:
        return True

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32)


def shared_over(reader: CountingReader, embedder: CountingEmbedder | None = None, search_depth: int = 0) -> SharedReads:
    fake_reader: Any = reader
    fake_embedder: Any = embedder or CountingEmbedder()
    return SharedReads(fake_reader, fake_embedder, search_depth)


async def test_concurrent_identical_reads_in_one_scope_reach_the_store_once() -> None:
    reader = CountingReader()
    reader.gate.clear()
    shared = shared_over(reader)
    with shared.scope():
        first = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 3))
        second = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 3))
        other = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 4))  # other arguments
        await asyncio.sleep(0)
        reader.gate.set()
        results = await asyncio.gather(first, second, other)
    assert reader.calls["fulltext"] == 2
    assert results[0] == results[1]
    assert len(results[2]) == 4


async def test_searches_to_different_depths_share_one_search_at_the_scope_depth() -> None:
    reader = CountingReader()
    reader.gate.clear()
    shared = shared_over(reader, search_depth=30)
    with shared.scope():
        searches = [asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", n)) for n in (20, 30, 40)]
        await asyncio.sleep(0)
        reader.gate.set()
        shallow, deep, deeper = await asyncio.gather(*searches)
    assert reader.limits == [30, 40]  # 20 and 30 from one search 30 deep; 40 is deeper than the scope's depth
    assert len(deep) == 30 and len(deeper) == 40
    assert shallow == deep[:20]

    reader.limits.clear()
    assert len(await shared.reader.search_chunks_fulltext("kb", "who", 20)) == 20
    assert reader.limits == [20]  # outside a scope a search goes as deep as it is asked


async def test_every_caller_gets_its_own_containers() -> None:
    reader = CountingReader()
    shared = shared_over(reader)
    with shared.scope():
        mine = await shared.reader.entities_in_chunks("kb", ["c1"])
        mine["c1"].append("mutated")
        mine["c2"] = []
        theirs = await shared.reader.entities_in_chunks("kb", ["c1"])
    assert reader.calls["entities_in_chunks"] == 1
    assert theirs == {"c1": ["e1", "e2"]}


async def test_embeddings_are_shared_and_copied() -> None:
    embedder = CountingEmbedder()
    shared = shared_over(CountingReader(), embedder)
    with shared.scope():
        first = await shared.embedder.embed(["a question"])
        first[0, 0] = 42.0
        second = await shared.embedder.embed(["a question"])
        await shared.embedder.embed(["another question"])
    assert embedder.calls == 2
    assert second[0, 0] == 1.0


async def test_outside_a_scope_every_read_reaches_the_store() -> None:
    reader = CountingReader()
    shared = shared_over(reader)
    await shared.reader.search_chunks_fulltext("kb", "who", 3)
    await shared.reader.search_chunks_fulltext("kb", "who", 3)
    assert reader.calls["fulltext"] == 2


async def test_two_requests_never_share_a_read() -> None:
    """Each request (task) opens its own scope: the second sees the store, not the first one's result."""
    reader = CountingReader()
    shared = shared_over(reader)

    async def request() -> list[ChunkHit]:
        with shared.scope():
            return await shared.reader.search_chunks_fulltext("kb", "who", 2)

    await asyncio.gather(request(), request())
    await request()
    assert reader.calls["fulltext"] == 3


async def test_a_cancelled_caller_does_not_cancel_the_read_the_others_await() -> None:
    reader = CountingReader()
    reader.gate.clear()
    shared = shared_over(reader)
    with shared.scope():
        impatient = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 2))
        patient = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 2))
        await asyncio.sleep(0)
        impatient.cancel()
        await asyncio.sleep(0)
        reader.gate.set()
        found = await patient
    assert impatient.cancelled()
    assert [hit.ordinal for hit in found] == [0, 1]
    assert reader.calls["fulltext"] == 1


async def test_a_failed_read_reaches_every_caller() -> None:
    reader = CountingReader()
    reader.fail = True
    shared = shared_over(reader)
    with shared.scope():
        outcomes = await asyncio.gather(
            shared.reader.search_chunks_fulltext("kb", "who", 2),
            shared.reader.search_chunks_fulltext("kb", "who", 2),
            return_exceptions=True,
        )
    assert all(isinstance(outcome, ConnectionError) for outcome in outcomes)
    assert reader.calls["fulltext"] == 1


async def test_leaving_the_scope_stops_reads_nobody_awaits() -> None:
    reader = CountingReader()
    reader.gate.clear()
    shared = shared_over(reader)
    with shared.scope():
        abandoned = asyncio.ensure_future(shared.reader.search_chunks_fulltext("kb", "who", 2))
        await asyncio.sleep(0)
        abandoned.cancel()
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not any(
        not task.done() and "search_chunks_fulltext" in repr(task.get_coro())
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task()
    )


def test_the_shared_reader_and_embedder_implement_the_ports() -> None:
    shared = shared_over(CountingReader())
    reader: GraphReader = shared.reader
    embedder: TextEmbedder = shared.embedder
    missing = [name for name in dir(GraphReader) if not name.startswith("_") and not hasattr(reader, name)]
    assert missing == []
    assert embedder.dimension == 3
    assert embedder.covers("text")


@pytest.mark.parametrize("limit", [1, 5])
async def test_a_nested_scope_joins_the_outer_one(limit: int) -> None:
    reader = CountingReader()
    shared = shared_over(reader)
    with shared.scope():
        await shared.reader.search_chunks_fulltext("kb", "who", limit)
        with shared.scope():
            await shared.reader.search_chunks_fulltext("kb", "who", limit)
    assert reader.calls["fulltext"] == 1


async def test_the_members_of_a_scope_tokenise_each_text_they_score_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenised: list[str] = []
    real_index_terms = text.index_terms

    def counting(passage: str) -> list[str]:
        tokenised.append(passage)
        return real_index_terms(passage)

    monkeypatch.setattr(text, "index_terms", counting)
    passage = "Teutberga was a queen of Lotharingia"

    async def member() -> list[float]:
        await asyncio.sleep(0)  # the members interleave, as fused agents do
        return [text.overlap_score(["queen", "lotharingia"], passage), loose_overlap(["queens"], passage)]

    with SharedReads.scope():
        scores = await asyncio.gather(member(), member(), member())
    assert scores == [[1.0, 1.0]] * 3
    assert tokenised == [passage]

    tokenised.clear()
    assert text.overlap_score(["king"], passage) == 0.0
    assert text.overlap_score(["queen"], passage) == 1.0
    assert tokenised == [passage, passage]  # outside a scope nothing is kept from one call to the next
