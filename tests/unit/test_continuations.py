"""Documents that continue one another in time (backend.graphrag_agent.agents.continuations)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from backend.graphrag_agent.agents.chunk_search import ChunkSearch
from backend.graphrag_agent.agents.continuations import Continuation, continuations
from backend.graphrag_agent.agents.tuning import ChunkSearchSettings, NaiveRagSettings
from backend.graphrag_agent.dates import DatePattern, DateScope
from backend.graphrag_agent.ports import ChunkHit, Vector

KB = "diary"
TUNING = NaiveRagSettings()
ANCHOR = ChunkHit("plan", "doc-plan", "20260121_1300", "Shall we see the film tomorrow?", 0, 1.0)


def _search(index: NeighbourIndex) -> ChunkSearch:
    return ChunkSearch(KB, index, 10, ChunkSearchSettings())


async def _continuations(
    search: ChunkSearch, anchor: ChunkHit, scope: DateScope | None = None, days: int = TUNING.continuation_days
) -> list[Continuation]:
    """naive_rag_agent's continuations among the 50 chunks nearest the anchor."""
    return await continuations(search, anchor, 50, scope, days=days, min_similarity=TUNING.min_continuation_similarity)


def _hit(chunk_id: str, doc_id: str, title: str, score: float, ordinal: int = 0) -> ChunkHit:
    return ChunkHit(chunk_id, doc_id, title, f"text of {chunk_id}", ordinal, score)


class NeighbourIndex:
    """Stores a vector for the anchor chunk only; its vector search returns `hits`, most similar first."""

    def __init__(self, hits: Sequence[ChunkHit], stored: bool = True) -> None:
        self.hits = list(hits)
        self.stored = stored
        self.vector_queries: list[Vector] = []

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        return []

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        self.vector_queries.append(embedding)
        return self.hits[:limit]

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        vector = np.ones(4, dtype=np.float32)
        return {chunk_id: vector for chunk_id in chunk_ids if self.stored and chunk_id == ANCHOR.chunk_id}


NEIGHBOURS = [
    _hit("plan", "doc-plan", "20260121_1300", 1.0),  # the anchor itself
    _hit("same-subject-in-march", "doc-march", "20260322_1700", 0.95),  # close, but weeks away
    _hit("reminder-2", "doc-reminder", "20260122_1700", 0.9, ordinal=1),
    _hit("reminder-1", "doc-reminder", "20260122_1700", 0.85),  # a second chunk of the same document
    _hit("undated", "doc-notes", "Notes", 0.8),
    _hit("day-before", "doc-before", "20260120_0900", 0.7),
    _hit("unrelated-next-day", "doc-other", "20260122_0800", TUNING.min_continuation_similarity - 0.01),
]


async def test_continuations_are_the_close_documents_dated_near_the_anchor() -> None:
    index = NeighbourIndex(NEIGHBOURS)
    found = await _continuations(_search(index), ANCHOR)
    assert [(c.hit.chunk_id, c.similarity) for c in found] == [("reminder-2", 0.9), ("day-before", 0.7)]
    assert len(index.vector_queries) == 1 and np.array_equal(index.vector_queries[0], np.ones(4))


async def test_continuations_stay_within_the_days_and_the_scope_asked_for() -> None:
    search = _search(NeighbourIndex(NEIGHBOURS))
    one_day = await _continuations(search, ANCHOR, days=0)
    assert one_day == []
    wide = await _continuations(search, ANCHOR, days=90)
    assert [c.hit.doc_id for c in wide] == ["doc-march", "doc-reminder", "doc-before"]
    on_the_22nd = DateScope((DatePattern(2026, 1, 22),))
    scoped = await _continuations(search, ANCHOR, on_the_22nd)
    assert [c.hit.doc_id for c in scoped] == ["doc-reminder"]


async def test_an_undated_anchor_or_one_without_a_vector_has_no_continuations() -> None:
    undated = ChunkHit("plan", "doc-plan", "Plans", "Shall we see the film tomorrow?", 0, 1.0)
    index = NeighbourIndex(NEIGHBOURS)
    assert await _continuations(_search(index), undated) == []
    assert index.vector_queries == []  # nothing searched for a document without a date
    assert await _continuations(_search(NeighbourIndex(NEIGHBOURS, stored=False)), ANCHOR) == []
