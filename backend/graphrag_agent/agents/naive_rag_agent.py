"""naive_rag_agent: chunk retrieval, fulltext and vector search fused by reciprocal rank fusion.

Both searches run concurrently. A vector hit counts only when its cosine similarity clears a
threshold, and a fulltext hit only when it covers enough of the question's content terms (or is
semantically close), so a question the KB knows nothing about gets no evidence instead of the
nearest unrelated chunks. The agent keeps no per-request state; `thread_id` only labels logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from backend.domain.agent_types import AgentType
from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.graphrag_agent.fusion import FusedItem, reciprocal_rank_fusion
from backend.graphrag_agent.ports import AgentTrace, ChunkHit, ChunkIndex, TextEmbedder
from backend.graphrag_agent.text import content_terms, overlap_score

logger = logging.getLogger(__name__)

A = TypeVar("A")
B = TypeVar("B")

# Calibrated with all-MiniLM-L6-v2 on the sample KB: answers score about 0.35–0.7 against their
# question, unrelated chunks below about 0.2.
DEFAULT_MIN_SIMILARITY = 0.3
DEFAULT_MIN_TERM_OVERLAP = 0.5


@dataclass(frozen=True, slots=True)
class _Candidate:
    hit: ChunkHit
    cosine: float | None
    bm25: float | None
    term_overlap: float


class NaiveRagAgent:
    """Retrieve-only chunk search over one KB (SPEC §9)."""

    def __init__(
        self,
        kb_prefix: str,
        index: ChunkIndex,
        embedder: TextEmbedder,
        top_k: int = 8,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        min_term_overlap: float = DEFAULT_MIN_TERM_OVERLAP,
        candidates: int | None = None,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        self._kb = kb_prefix
        self._index = index
        self._embedder = embedder
        self._top_k = top_k
        self._min_similarity = min_similarity
        self._min_term_overlap = min_term_overlap
        # Each search looks deeper than top_k so fusion has overlap to work with.
        self._candidates = candidates if candidates is not None else max(3 * top_k, 20)

    @property
    def agent_type(self) -> str:
        return AgentType.NAIVE_RAG.value

    @property
    def kb_prefix(self) -> str:
        return self._kb

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        started = time.perf_counter()
        if not query.strip():
            return _trace([])
        fulltext_hits, vector_hits = await _both(
            self._index.search_chunks_fulltext(self._kb, query, self._candidates), self._vector_search(query)
        )
        candidates = self._admit(content_terms(query), fulltext_hits, vector_hits)
        results = self._fuse(candidates)
        logger.debug(
            "%s kb=%s thread=%s fulltext=%d vector=%d kept=%d in %.1f ms",
            self.agent_type,
            self._kb,
            thread_id,
            len(fulltext_hits),
            len(vector_hits),
            len(results),
            (time.perf_counter() - started) * 1000,
        )
        return _trace(results)

    async def _vector_search(self, query: str) -> list[ChunkHit]:
        embedding = (await self._embedder.embed([query]))[0]
        return await self._index.search_chunks_vector(self._kb, embedding, self._candidates)

    def _admit(
        self, terms: Sequence[str], fulltext_hits: Sequence[ChunkHit], vector_hits: Sequence[ChunkHit]
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        """The hits that count as evidence, per search, in each search's order."""
        cosines = {hit.chunk_id: hit.score for hit in vector_hits}
        bm25 = {hit.chunk_id: hit.score for hit in fulltext_hits}

        def candidate(hit: ChunkHit) -> _Candidate:
            overlap = overlap_score(terms, f"{hit.title}\n{hit.text}")
            return _Candidate(hit, cosines.get(hit.chunk_id), bm25.get(hit.chunk_id), overlap)

        vector = [candidate(hit) for hit in vector_hits if hit.score >= self._min_similarity]
        fulltext = [
            c
            for c in map(candidate, fulltext_hits)
            if c.term_overlap >= self._min_term_overlap or (c.cosine or 0.0) >= self._min_similarity
        ]
        return fulltext, vector

    def _fuse(self, searches: tuple[list[_Candidate], list[_Candidate]]) -> list[RetrievalResult]:
        fulltext, vector = searches
        by_id = {c.hit.chunk_id: c for c in (*fulltext, *vector)}
        fused = reciprocal_rank_fusion([[c.hit.chunk_id for c in fulltext], [c.hit.chunk_id for c in vector]])
        return [self._result(by_id[item.item_id], item) for item in fused[: self._top_k]]

    def _result(self, candidate: _Candidate, fused: FusedItem) -> RetrievalResult:
        hit = candidate.hit
        fulltext_rank, vector_rank = fused.ranks
        return RetrievalResult(
            result_id=f"chunk:{hit.chunk_id}",
            granularity=Granularity.CHUNK,
            evidence=hit.text,
            source=EvidenceSource(doc_id=hit.doc_id, title=hit.title, chunk_id=hit.chunk_id),
            score=round(min(1.0, max(0.0, fused.score)), 6),
            metadata={
                "agent_type": self.agent_type,
                "kb": self._kb,
                "ordinal": hit.ordinal,
                "fulltext_rank": fulltext_rank,
                "vector_rank": vector_rank,
                "cosine": None if candidate.cosine is None else round(candidate.cosine, 6),
                "bm25": None if candidate.bm25 is None else round(candidate.bm25, 6),
                "term_overlap": round(candidate.term_overlap, 6),
            },
        )


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Run two awaitables concurrently; if either fails or we are cancelled, stop and await the other."""
    task_a, task_b = asyncio.ensure_future(first), asyncio.ensure_future(second)
    try:
        return await asyncio.gather(task_a, task_b)
    except BaseException:
        task_a.cancel()
        task_b.cancel()
        await asyncio.gather(task_a, task_b, return_exceptions=True)
        raise


def _trace(results: Sequence[RetrievalResult]) -> AgentTrace:
    return {
        "context": _context(results),
        "retrieval_results": [result.to_dict() for result in results],
        "reference": _reference(results),
    }


def _context(results: Sequence[RetrievalResult]) -> str:
    return "\n\n".join(f"[{n}] {r.source.title}\n{r.evidence}" for n, r in enumerate(results, start=1))


def _reference(results: Sequence[RetrievalResult]) -> dict[str, Any]:
    documents: dict[str, str] = {}
    for result in results:
        documents.setdefault(result.source.doc_id, result.source.title)
    return {
        "documents": [{"doc_id": doc_id, "title": title} for doc_id, title in documents.items()],
        "chunks": [result.source.chunk_id for result in results],
        "entities": [],
        "relationships": [],
        "communities": [],
    }
