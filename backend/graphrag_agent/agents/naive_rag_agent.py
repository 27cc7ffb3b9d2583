"""naive_rag_agent: chunk retrieval, fulltext, vector and feedback search fused by reciprocal rank fusion.

Fulltext and vector search run concurrently, then the feedback search from the best fulltext hits;
`ChunkSearch` admits only hits that look like evidence (see `chunk_search.py`). A question's clauses and
dates add searches (`focus.py`); the documents that continue the best hit's in time join by score
(`continuations.py`). The agent keeps no per-request state; `thread_id` only labels logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.agent_types import AgentType
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.chunk_search import RANKING_NAMES, ChunkCandidate, ChunkRankings, ChunkSearch
from backend.graphrag_agent.agents.common import Retrieved, RetrieveOnlyAgent, all_of, chunk_result
from backend.graphrag_agent.agents.continuations import continuations
from backend.graphrag_agent.agents.tuning import ChunkSearchSettings, NaiveRagSettings
from backend.graphrag_agent.dates import DateScope
from backend.graphrag_agent.focus import QuestionFocus
from backend.graphrag_agent.fusion import merge_by_score, reciprocal_rank_fusion, spread_over_groups
from backend.graphrag_agent.ports import ChunkIndex, TextEmbedder
from backend.graphrag_agent.text import TermSets, index_term_set


class NaiveRagAgent(RetrieveOnlyAgent):
    """Retrieve-only chunk search over one KB (SPEC §9); its tuning is `NaiveRagSettings` (tuning.py)."""

    AGENT = AgentType.NAIVE_RAG

    def __init__(
        self,
        kb_prefix: str,
        index: ChunkIndex,
        embedder: TextEmbedder,
        top_k: int = 8,
        settings: NaiveRagSettings | None = None,
        term_sets: TermSets = index_term_set,
    ) -> None:
        """`index` and `embedder` are what it reads through, `term_sets` how it tokenises the chunks it scores: a
        fused request's shared ones when a fusion agent builds it (see shared_reads.py)."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        super().__init__(kb_prefix)
        self._embedder = embedder
        self._top_k = top_k
        self._settings = settings = settings or NaiveRagSettings()
        depth = settings.search_depth(top_k)
        self._search = ChunkSearch(kb_prefix, index, depth, settings.chunks, term_sets)
        # The anchor's neighbours in time are few among its neighbours in meaning: look as deep as a dated search.
        self._continuation_depth = depth * settings.chunks.scoped_depth

    async def _retrieve(self, query: str) -> Retrieved:
        # Its clauses and the dates it names narrow further searches (see focus.py).
        focus = QuestionFocus.of(query)
        searches = focus.searches()
        rankings = await all_of(self._search.rankings(s.text, self._embedder, s.scope) for s in searches)
        details = {"fulltext": len(rankings[0].fulltext), "vector": len(rankings[0].vector), "searches": len(searches)}
        return Retrieved(await self._fuse(focus, rankings), details)

    async def _fuse(self, focus: QuestionFocus, rankings: Sequence[ChunkRankings]) -> list[RetrievalResult]:
        """Each search's rankings fused by RRF, the searches combined by `focus`, the best hit's continuations added,
        spread over documents."""
        by_id: dict[str, ChunkCandidate] = {}
        for ranking in reversed(rankings):  # the whole question's candidates win
            by_id |= ranking.by_id()
        fused = focus.combine(
            [_fused(ranking, self._settings.chunks) for ranking in rankings], key=lambda item: item.chunk_id
        )
        fused = await self._with_continuations(fused, by_id, focus.scope)
        fused = spread_over_groups(fused, lambda item: by_id[item.chunk_id].hit.doc_id)
        return [self._result(by_id[item.chunk_id], item) for item in fused[: self._top_k]]

    async def _with_continuations(
        self, fused: list[_FusedChunk], by_id: dict[str, ChunkCandidate], scope: DateScope | None
    ) -> list[_FusedChunk]:
        """`fused` with the continuations of its best chunk's document (continuations.py), each scored the best chunk's
        score times its similarity to it; new chunks join `by_id`."""
        if not fused:
            return fused
        best = fused[0]
        found = await continuations(
            self._search,
            by_id[best.chunk_id].hit,
            self._continuation_depth,
            scope,
            days=self._settings.continuation_days,
            min_similarity=self._settings.min_continuation_similarity,
        )
        ranks = {item.chunk_id: item.ranks for item in fused}
        added = [
            _FusedChunk(c.hit.chunk_id, best.score * c.similarity, ranks.get(c.hit.chunk_id, _UNRANKED), best.chunk_id)
            for c in found
        ]
        for c in found:
            by_id.setdefault(c.hit.chunk_id, ChunkCandidate(c.hit, None, None, 0.0))
        return merge_by_score(fused, added, key=lambda item: item.chunk_id)

    def _result(self, candidate: ChunkCandidate, fused: _FusedChunk) -> RetrievalResult:
        metadata = {
            "agent_type": self.agent_type,
            "kb": self._kb,
            **fused.ranks,
            "continues": fused.continues,
            **candidate.trace_metadata(),
        }
        return chunk_result(candidate.hit, fused.score, metadata)


@dataclass(frozen=True, slots=True)
class _FusedChunk:
    chunk_id: str
    score: float
    ranks: dict[str, int | None]  # `fulltext_rank`, ...: the chunk's rank in each search's ranking
    continues: str | None = None  # the chunk whose document this one continues, when it joined as a continuation


_UNRANKED: dict[str, int | None] = {f"{name}_rank": None for name in RANKING_NAMES}


def _fused(rankings: ChunkRankings, settings: ChunkSearchSettings) -> list[_FusedChunk]:
    """One search's rankings fused by RRF, with each chunk's rank in each of them."""
    lists = rankings.weighted_lists(settings)
    fused = reciprocal_rank_fusion([ids for _, ids, _ in lists], weights=[weight for _, _, weight in lists])
    return [
        _FusedChunk(
            item.item_id,
            item.score,
            _UNRANKED | {f"{name}_rank": rank for (name, _, _), rank in zip(lists, item.ranks, strict=True)},
        )
        for item in fused
    ]
