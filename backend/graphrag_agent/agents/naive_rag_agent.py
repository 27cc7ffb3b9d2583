"""naive_rag_agent: chunk retrieval, fulltext and vector search fused by reciprocal rank fusion.

Both searches run concurrently; `ChunkSearch` admits only hits that look like evidence (see
`chunk_search.py`). The agent keeps no per-request state; `thread_id` only labels logs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from backend.domain.agent_types import AgentType
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.chunk_search import (
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_MIN_TERM_OVERLAP,
    ChunkCandidate,
    ChunkRankings,
    ChunkSearch,
)
from backend.graphrag_agent.agents.common import all_of, build_trace, chunk_result, log_retrieval
from backend.graphrag_agent.clauses import question_clauses
from backend.graphrag_agent.fusion import FusedItem, interleave, reciprocal_rank_fusion, spread_over_groups
from backend.graphrag_agent.ports import AgentTrace, ChunkIndex, TextEmbedder

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
        # A question about two events in time: each clause is searched too (see clauses.py).
        clauses = question_clauses(query)
        rankings = await all_of(self._search.rankings(text, self._embedder) for text in [query, *clauses])
        results = self._fuse(rankings)
        log_retrieval(
            logger,
            self.agent_type,
            self._kb,
            thread_id,
            started,
            len(results),
            fulltext=len(rankings[0].fulltext),
            vector=len(rankings[0].vector),
            clauses=len(clauses),
        )
        return build_trace(results)

    def _fuse(self, rankings: Sequence[ChunkRankings]) -> list[RetrievalResult]:
        """Each text's two searches fused by RRF, the texts' rankings interleaved, spread over documents."""
        by_id: dict[str, ChunkCandidate] = {}
        for ranking in reversed(rankings):  # the whole question's candidates win
            by_id |= ranking.by_id()
        per_text = [reciprocal_rank_fusion(r.id_lists(), weights=r.weights()) for r in rankings]
        fused = interleave(per_text, key=lambda item: item.item_id)
        fused = spread_over_groups(fused, lambda item: by_id[item.item_id].hit.doc_id)
        return [self._result(by_id[item.item_id], item) for item in fused[: self._top_k]]

    def _result(self, candidate: ChunkCandidate, fused: FusedItem) -> RetrievalResult:
        fulltext_rank, vector_rank = fused.ranks
        metadata = {"agent_type": self.agent_type, "kb": self._kb, "fulltext_rank": fulltext_rank}
        return chunk_result(
            candidate.hit, fused.score, {**metadata, "vector_rank": vector_rank, **candidate.trace_metadata()}
        )
