"""graph_agent: local search around the question's entities, global search over community summaries.

Local search (SPEC §9): seed entities by name and by vector → their strongest relations and
neighbours → the chunks that mention them, ranked by weighted mentions. That graph ranking is fused
(RRF) with the plain chunk searches, so the agent does no worse than chunk retrieval on simple
questions; the top entities, relations and the seeds' communities follow the chunks as evidence.

Global search ranks community summaries by similarity to the question. The rule that picks it
depends only on the question and on what the searches found, never on the dataset:
- the question asks for an overview: wording such as "main themes", "overall", "summarise",
  "overview", "in general" (or 总结 / 概括 / 主要 ...);
- or nothing specific matched: no entity linked and no chunk admitted by the plain searches, so
  community summaries are the only evidence left (kept only above a similarity threshold).
Otherwise local search. When global search finds no community, local search runs instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.agent_types import AgentType
from backend.domain.graph import CommunityRecord
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.bridges import BridgeFinder
from backend.graphrag_agent.agents.chunk_search import ChunkCandidate, ChunkRankings, ChunkSearch
from backend.graphrag_agent.agents.common import Retrieved, RetrieveOnlyAgent, all_of, concurrently, nothing
from backend.graphrag_agent.agents.local_search import (
    EntityLinker,
    EvidenceAssembler,
    Expansion,
    GraphExpander,
    RankedChunk,
    Seed,
    seed_confidence,
)
from backend.graphrag_agent.agents.tuning import GraphSearchSettings
from backend.graphrag_agent.focus import QuestionFocus
from backend.graphrag_agent.fusion import reciprocal_rank_fusion, spread_over_groups
from backend.graphrag_agent.model import CompletionModel
from backend.graphrag_agent.ports import (
    ChunkHit,
    CommunityHit,
    EntityHit,
    GraphReader,
    TextEmbedder,
    Vector,
)
from backend.graphrag_agent.text import TermSets, index_term_set

_BROAD = re.compile(
    r"\b(?:main|key|major|central|common|recurring|overall)\s+(?:themes?|topics?|ideas?|points?|trends?|findings?)\b"
    r"|\bsummar(?:y|ies|ise|ize|ising|izing)\b|\boverview\b|\boverall\b|\bin general\b|\bbig picture\b"
    r"|\bwhat (?:is|are) (?:this|these|the) (?:documents?|corpus|collection|knowledge base|texts?) about\b"
    r"|总结|概括|概述|总体|整体|主要内容|主题",
    re.IGNORECASE,
)


def is_broad_question(query: str) -> bool:
    """Does the question ask for an overview rather than a fact?"""
    return _BROAD.search(query) is not None


@dataclass(frozen=True, slots=True)
class Probe:
    """The first round of searches with the question."""

    embedding: Vector
    chunks: ChunkRankings
    seeds: tuple[Seed, ...]
    communities: tuple[CommunityHit, ...] = ()  # searched up front only for broad questions

    @property
    def found_nothing(self) -> bool:
        return not self.seeds and not self.chunks.fulltext and not self.chunks.vector


class GraphSearch:
    """Question → probe → local or global evidence, for one KB. Shared by the graph and deep-research agents."""

    def __init__(
        self,
        kb: str,
        reader: GraphReader,
        embedder: TextEmbedder,
        top_k: int,
        settings: GraphSearchSettings | None,
        agent_type: str,
        term_sets: TermSets = index_term_set,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        settings = settings or GraphSearchSettings()
        self.kb = kb
        self.top_k = top_k
        self.settings = settings
        self._reader = reader
        self._embedder = embedder
        self.chunk_search = ChunkSearch(kb, reader, settings.candidates, settings.chunks, term_sets)
        self.linker = EntityLinker(kb, reader, settings)
        self.expander = GraphExpander(kb, reader, settings, term_sets)
        self.bridges = BridgeFinder(kb, reader, settings.bridges, term_sets)
        self.assembler = EvidenceAssembler(kb, reader, settings, agent_type, term_sets)

    async def probe(self, query: str, with_communities: bool = False) -> Probe:
        """Chunk and entity searches by text and by vector, all at once."""
        (embedding, chunk_vector, entity_vector, communities), chunk_text, entity_text = await concurrently(
            self._vector_searches(query, with_communities),
            self.chunk_search.fulltext(query),
            self.linker.by_name(query),
        )
        admitted = self.chunk_search.admit(query, chunk_text, chunk_vector)
        chunks = await self.chunk_search.with_feedback(admitted, embedding if self._embedder.covers(query) else None)
        seeds = self.linker.link(query, entity_text, entity_vector)
        return Probe(embedding, chunks, tuple(seeds), tuple(communities))

    async def _vector_searches(
        self, query: str, with_communities: bool
    ) -> tuple[Vector, list[ChunkHit], list[EntityHit], list[CommunityHit]]:
        embedding = (await self._embedder.embed([query]))[0]
        # A vector of a language the model does not cover is noise; fulltext covers chunks and entities alone.
        covered = self._embedder.covers(query)
        chunk_hits, entity_hits, community_hits = await concurrently(
            self.chunk_search.vector(embedding) if covered else nothing(),
            self.linker.by_vector(embedding) if covered else nothing(),
            self.search_communities(embedding) if with_communities else nothing(),
        )
        return embedding, chunk_hits, entity_hits, community_hits

    async def search_communities(self, embedding: Vector) -> list[CommunityHit]:
        # Deeper than top_k so an overview can re-rank by importance.
        return await self._reader.search_communities(self.kb, embedding, None, 3 * self.top_k)

    async def local(self, query: str, probe: Probe) -> tuple[list[RankedChunk], Expansion]:
        expansion, bridges = await concurrently(
            self.expander.expand(query, probe.seeds), self.bridges.ranking(query, probe.seeds)
        )
        return await self.with_focus(query, self.fuse(probe.chunks, expansion, bridges=bridges)), expansion

    async def with_focus(self, query: str, ranked: list[RankedChunk]) -> list[RankedChunk]:
        """`ranked` combined with the plain rankings of the narrower searches the question asks for (its clauses,
        the dates it names: see focus.py); `ranked` as it is when it asks for none."""
        focus = QuestionFocus.of(query)
        extra = focus.extra_searches()
        if not extra:
            return ranked
        found = await all_of(self.chunk_search.rankings(s.text, self._embedder, s.scope) for s in extra)
        plain = [self.plain_chunks(rankings) for rankings in found]
        return spread_over_groups(focus.combine([ranked, *plain], key=_chunk_id), _document_of)

    def fuse(
        self,
        chunks: ChunkRankings,
        expansion: Expansion,
        themes: Sequence[ChunkCandidate] = (),
        bridges: Sequence[ChunkHit] = (),
    ) -> list[RankedChunk]:
        """The graph ranking fused with the plain searches (and theme search and bridges, if any) by RRF,
        then spread over documents (each document's best chunk first)."""
        candidates = chunks.by_id()
        graph = {c.hit.chunk_id: c for c in expansion.chunks}
        hits = {c.hit.chunk_id: c.hit for c in expansion.chunks}
        hits |= {c.hit.chunk_id: c.hit for c in (*themes, *candidates.values())}
        hits |= {hit.chunk_id: hit for hit in bridges}
        # The graph ranking weighs as much as the text searches together, which often agree with each other,
        # unless its seeds are hubs; so do the bridges, which start from the seeds' documents. The feedback
        # search also reaches past the question's words: it takes the weight the graph ranking loses to hubs.
        settings = self.settings
        confidence = seed_confidence(expansion, settings.specific_mentions)
        grown = expansion.chunk_ids()
        feedback_share = 1.0 - confidence if grown else 1.0
        rankings = [("graph", grown, confidence), *chunks.weighted_lists(settings.chunks, feedback_share)]
        rankings += [("theme", [c.hit.chunk_id for c in themes], 0.5)] if themes else []
        bridge_weight = settings.bridge_weight * confidence
        rankings += [("bridge", [hit.chunk_id for hit in bridges], bridge_weight)] if bridges else []
        present = [ranking for ranking in rankings if ranking[1]]  # scores relative to the lists that found something
        fused = reciprocal_rank_fusion([ids for _, ids, _ in present], weights=[w for _, _, w in present])
        ranked = []
        for item in fused:
            metadata: dict[str, float | None] = {f"{name}_rank": None for name, _, _ in rankings}
            metadata |= {f"{name}_rank": rank for (name, _, _), rank in zip(present, item.ranks, strict=True)}
            if item.item_id in graph:
                metadata["graph_score"] = round(graph[item.item_id].score, 6)
            if item.item_id in candidates:
                metadata |= candidates[item.item_id].trace_metadata()
            ranked.append(RankedChunk(hits[item.item_id], item.score, metadata))
        return spread_over_groups(ranked, _document_of)

    def plain_chunks(self, chunks: ChunkRankings) -> list[RankedChunk]:
        """The plain searches alone, fused (what naive_rag_agent would return)."""
        return self.fuse(chunks, Expansion())

    async def local_results(self, query: str, probe: Probe) -> list[RetrievalResult]:
        ranked, expansion = await self.local(query, probe)
        top = ranked[: self.top_k]
        entities, relations = await self.assembler.entities_and_relations(top, expansion)
        communities = self.assembler.communities(
            self.assembler.local_communities(query, probe.seeds, expansion), "local"
        )
        return self.assembler.chunks(top) + entities + relations + communities

    async def probe_then_global(self, query: str) -> tuple[Probe, list[RetrievalResult]]:
        """The question's probe and its global (community) evidence, empty unless the rule in the module docstring
        calls for it."""
        broad = is_broad_question(query)
        probe = await self.probe(query, with_communities=broad)
        return probe, await self.global_search(probe, broad)

    async def global_search(self, probe: Probe, broad: bool) -> list[RetrievalResult]:
        """Community evidence when the rule in the module docstring calls for it, else nothing."""
        if not (broad or probe.found_nothing):
            return []
        hits = list(probe.communities) if broad else await self.search_communities(probe.embedding)
        return self.global_results(probe, hits, broad)

    def global_results(self, probe: Probe, hits: list[CommunityHit], broad: bool) -> list[RetrievalResult]:
        """Community summaries, then the best plain chunks (answers cite chunks)."""
        kept = overview_ranking(hits) if broad else similar_communities(hits, self.settings.min_community_similarity)
        if not kept:
            return []
        chunks = self.plain_chunks(probe.chunks)[: max(1, self.top_k // 2)]
        return self.assembler.communities(kept[: self.top_k], "global") + self.assembler.chunks(chunks)


def similar_communities(hits: list[CommunityHit], floor: float) -> list[tuple[CommunityRecord, float]]:
    return [(hit.community, hit.score) for hit in hits if hit.score >= floor]


def overview_ranking(hits: list[CommunityHit]) -> list[tuple[CommunityRecord, float]]:
    """For an overview question: similarity and importance (community rank) fused.

    Such a question is barely similar to any summary, so no similarity threshold applies.
    """
    by_rank = sorted(hits, key=lambda h: (-h.community.rank, h.community.level, h.community.community_id))
    fused = reciprocal_rank_fusion(
        [[h.community.community_id for h in hits], [h.community.community_id for h in by_rank]]
    )
    records = {h.community.community_id: h.community for h in hits}
    return [(records[item.item_id], item.score) for item in fused]


def _document_of(chunk: RankedChunk) -> str:
    return chunk.hit.doc_id


def _chunk_id(chunk: RankedChunk) -> str:
    return chunk.hit.chunk_id


class GraphSearchAgent(RetrieveOnlyAgent):
    """The agent template (common.py) for the agents built on `GraphSearch`: graph, hybrid and deep research.

    All three are built alike: the KB, its reader and the embedder, top_k, an optional language model and their
    tuning (`GraphSearchSettings`, tuning.py). hybrid_agent asks the model for keywords and deep_research_agent for
    a plan, each falling back to its offline method; graph_agent asks it nothing.
    """

    def __init__(
        self,
        kb_prefix: str,
        reader: GraphReader,
        embedder: TextEmbedder,
        top_k: int = 8,
        model: CompletionModel | None = None,
        settings: GraphSearchSettings | None = None,
        term_sets: TermSets = index_term_set,
    ) -> None:
        """`reader` and `embedder` are what it reads through, `term_sets` how it tokenises the texts it scores: a
        fused request's shared ones when a fusion agent builds it (see shared_reads.py)."""
        super().__init__(kb_prefix)
        self._reader = reader
        self._embedder = embedder
        self._model = model
        self._search = GraphSearch(kb_prefix, reader, embedder, top_k, settings, self.agent_type, term_sets)


class GraphAgent(GraphSearchAgent):
    """Retrieve-only graph search over one KB (SPEC §9); keeps no per-request state."""

    AGENT = AgentType.GRAPH

    async def _retrieve(self, query: str) -> Retrieved:
        probe, results = await self._search.probe_then_global(query)
        mode = "global" if results else "local"
        if not results:
            results = await self._search.local_results(query, probe)
        return Retrieved(results, {"mode": mode, "seeds": len(probe.seeds)})
