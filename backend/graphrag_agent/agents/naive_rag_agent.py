"""naive_rag_agent: chunk retrieval, fulltext and vector search fused by reciprocal rank fusion.

Both searches run concurrently; `ChunkSearch` admits only hits that look like evidence (see
`chunk_search.py`). The agent keeps no per-request state; `thread_id` only labels logs.
"""

from __future__ import annotations

import logging
import time

from backend.domain.agent_types import AgentType
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.chunk_search import (
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_MIN_TERM_OVERLAP,
    ChunkCandidate,
    ChunkRankings,
    ChunkSearch,
)
from backend.graphrag_agent.agents.common import build_trace, chunk_result, concurrently, log_retrieval
from backend.graphrag_agent.fusion import FusedItem, reciprocal_rank_fusion
from backend.graphrag_agent.ports import AgentTrace, ChunkHit, ChunkIndex, TextEmbedder

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MIN_SIMILARITY", "DEFAULT_MIN_TERM_OVERLAP", "NaiveRagAgent"]


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
        self._embedder = embedder
        self._top_k = top_k
        # Each search looks deeper than top_k so fusion has overlap to work with.
        depth = candidates if candidates is not None else max(3 * top_k, 20)
        self._search = ChunkSearch(kb_prefix, index, depth, min_similarity, min_term_overlap)

    @property
    def agent_type(self) -> str:
        return AgentType.NAIVE_RAG.value

    @property
    def kb_prefix(self) -> str:
        return self._kb

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        started = time.perf_counter()
        if not query.strip():
            return build_trace([])
        fulltext_hits, vector_hits = await concurrently(self._search.fulltext(query), self._vector_search(query))
        results = self._fuse(self._search.admit(query, fulltext_hits, vector_hits))
        log_retrieval(
            logger,
            self.agent_type,
            self._kb,
            thread_id,
            started,
            len(results),
            fulltext=len(fulltext_hits),
            vector=len(vector_hits),
        )
        return build_trace(results)

    async def _vector_search(self, query: str) -> list[ChunkHit]:
        embedding = (await self._embedder.embed([query]))[0]
        return await self._search.vector(embedding)

    def _fuse(self, rankings: ChunkRankings) -> list[RetrievalResult]:
        by_id = rankings.by_id()
        fused = reciprocal_rank_fusion(rankings.id_lists())
        return [self._result(by_id[item.item_id], item) for item in fused[: self._top_k]]

    def _result(self, candidate: ChunkCandidate, fused: FusedItem) -> RetrievalResult:
        fulltext_rank, vector_rank = fused.ranks
        metadata = {"agent_type": self.agent_type, "kb": self._kb, "fulltext_rank": fulltext_rank}
        return chunk_result(
            candidate.hit, fused.score, {**metadata, "vector_rank": vector_rank, **candidate.trace_metadata()}
        )
