"""hybrid_agent: LightRAG-style dual-level retrieval.

The question's keywords (from the model when one is wired, read off the question otherwise) drive
two searches. Low-level keywords (names, numbers, quoted phrases) are linked to entities, whose
chunks and relations are gathered as in local graph search. High-level keywords (themes and
concepts) are embedded and matched against community summaries, and against passages when no entity
was linked. Chunk rankings — the graph's, the plain question searches' and the themes' — are fused
by RRF, and so are the communities the themes found and those the linked entities belong to.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from backend.domain.agent_types import AgentType
from backend.domain.graph import CommunityRecord
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.chunk_search import ChunkCandidate, ChunkRankings
from backend.graphrag_agent.agents.common import Retrieved, concurrently, nothing
from backend.graphrag_agent.agents.graph_agent import (
    GraphSearchAgent,
    is_broad_question,
    overview_ranking,
    similar_communities,
)
from backend.graphrag_agent.agents.local_search import Expansion, Seed
from backend.graphrag_agent.fusion import reciprocal_rank_fusion
from backend.graphrag_agent.keywords import KeywordExtractor, Keywords, LlmKeywordExtractor, OfflineKeywordExtractor
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, Vector


@dataclass(frozen=True, slots=True)
class _Found:
    """What one question's searches found at both levels."""

    seeds: list[Seed]
    expansion: Expansion
    bridges: list[ChunkHit]
    question: ChunkRankings
    themes: tuple[ChunkCandidate, ...]
    communities: list[CommunityHit]


class HybridAgent(GraphSearchAgent):
    """Retrieve-only dual-level (entity and theme) search over one KB (SPEC §9); keeps no per-request state."""

    AGENT = AgentType.HYBRID

    @cached_property
    def _keywords(self) -> KeywordExtractor:
        """The model's keywords (the offline ones when it fails); the offline ones without a model."""
        return LlmKeywordExtractor(self._model) if self._model is not None else OfflineKeywordExtractor()

    async def _retrieve(self, query: str) -> Retrieved:
        keywords = await self._keywords.extract(query)
        found = await self._search_both_levels(query, keywords)
        details = {"low": keywords.low_level, "high": keywords.high_level, "seeds": len(found.seeds)}
        return Retrieved(await self._results(query, found), details)

    async def _search_both_levels(self, query: str, keywords: Keywords) -> _Found:
        """Every search at once: the question's own, the entities' (low level) and the themes' (high level)."""
        low_text, high_text = " ".join(keywords.low_level), " ".join(keywords.high_level)
        query_vector, low_vector, high_vector = await self._embed(query, low_text, high_text)
        question_text, question_vector, (name_hits, entity_hits), (theme_hits, communities) = await concurrently(
            self._search.chunk_search.fulltext(query),
            self._search.chunk_search.vector(query_vector) if self._embedder.covers(query) else nothing(),
            self._low_level(low_text, low_vector),
            self._high_level(high_text, high_vector),
        )
        seeds = self._search.linker.link(low_text, name_hits, entity_hits)
        admitted = self._search.chunk_search.admit(query, question_text, question_vector)
        covered = query_vector if self._embedder.covers(query) else None
        expansion, bridges, question = await concurrently(
            self._search.expander.expand(query, seeds),
            self._search.bridges.ranking(query, seeds),
            self._search.chunk_search.with_feedback(admitted, covered),
        )
        # Themes pick passages only for a question that names nothing specific: otherwise the question's own
        # searches already cover its theme words, and theme matches crowd out the named entities' chunks.
        themes = () if seeds else self._search.chunk_search.admit_vector(theme_hits)
        return _Found(seeds, expansion, bridges, question, themes, communities)

    async def _embed(self, query: str, low_text: str, high_text: str) -> tuple[Vector, Vector | None, Vector | None]:
        """One embedder call for the question and whichever keyword texts exist."""
        texts = [query, *(text for text in (low_text, high_text) if text)]
        vectors = list(await self._embedder.embed(texts))
        query_vector = vectors.pop(0)
        low_vector = vectors.pop(0) if low_text else None
        high_vector = vectors.pop(0) if high_text else None
        return query_vector, low_vector, high_vector

    async def _low_level(self, text: str, vector: Vector | None) -> tuple[list[EntityHit], list[EntityHit]]:
        if not text or vector is None:
            return [], []
        by_vector = self._search.linker.by_vector(vector) if self._embedder.covers(text) else nothing()
        return await concurrently(self._search.linker.by_name(text), by_vector)

    async def _high_level(self, text: str, vector: Vector | None) -> tuple[list[ChunkHit], list[CommunityHit]]:
        if vector is None:
            return [], []
        passages = self._search.chunk_search.vector(vector) if self._embedder.covers(text) else nothing()
        return await concurrently(passages, self._search.search_communities(vector))

    async def _results(self, query: str, found: _Found) -> list[RetrievalResult]:
        fused = self._search.fuse(found.question, found.expansion, found.themes, found.bridges)
        chunks = (await self._search.with_focus(query, fused))[: self._search.top_k]
        assembler = self._search.assembler
        entities, relations = await assembler.entities_and_relations(chunks, found.expansion)
        communities = self._communities(query, found.seeds, found.expansion, found.communities)
        return assembler.chunks(chunks) + entities + relations + assembler.communities(communities, "hybrid")

    def _communities(
        self, query: str, seeds: list[Seed], expansion: Expansion, hits: list[CommunityHit]
    ) -> list[tuple[CommunityRecord, float]]:
        """Communities the themes found fused with the seeds' communities.

        Theme matches must clear the similarity floor, unless the question asks for an overview.
        """
        floor = self._search.settings.min_community_similarity
        by_theme = overview_ranking(hits) if is_broad_question(query) else similar_communities(hits, floor)
        by_seed = self._search.assembler.local_communities(query, seeds, expansion)
        records = {c.community_id: c for c, _ in (*by_theme, *by_seed)}
        fused = reciprocal_rank_fusion([[c.community_id for c, _ in by_theme], [c.community_id for c, _ in by_seed]])
        return [(records[f.item_id], f.score) for f in fused[: self._search.settings.community_limit]]
