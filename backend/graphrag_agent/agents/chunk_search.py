"""Plain chunk retrieval: fulltext and vector search with admission thresholds.

A vector hit counts only when its cosine similarity clears a threshold, and a fulltext hit only when
it covers enough of the question's content terms (or is semantically close), so a question the KB
knows nothing about gets no evidence instead of the nearest unrelated chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.graphrag_agent.agents.common import concurrently
from backend.graphrag_agent.ports import ChunkHit, ChunkIndex, TextEmbedder, Vector
from backend.graphrag_agent.text import fulltext_query_terms, overlap_score

# Calibrated with all-MiniLM-L6-v2 on the sample KB: answers score about 0.35–0.7 against their
# question, unrelated chunks below about 0.2.
DEFAULT_MIN_SIMILARITY = 0.3
DEFAULT_MIN_TERM_OVERLAP = 0.3
# How many of the best fulltext hits say how well the question's words are covered.
_COVERAGE_DEPTH = 3


@dataclass(frozen=True, slots=True)
class ChunkCandidate:
    hit: ChunkHit
    cosine: float | None
    bm25: float | None
    term_overlap: float

    def trace_metadata(self) -> dict[str, float | None]:
        """What the plain searches said about the chunk, for the trace."""
        return {
            "cosine": None if self.cosine is None else round(self.cosine, 6),
            "bm25": None if self.bm25 is None else round(self.bm25, 6),
            "term_overlap": round(self.term_overlap, 6),
        }


@dataclass(frozen=True, slots=True)
class ChunkRankings:
    """The admitted hits of each search, in that search's order."""

    fulltext: tuple[ChunkCandidate, ...] = ()
    vector: tuple[ChunkCandidate, ...] = ()

    def by_id(self) -> dict[str, ChunkCandidate]:
        return {c.hit.chunk_id: c for c in (*self.fulltext, *self.vector)}

    def id_lists(self) -> list[list[str]]:
        return [[c.hit.chunk_id for c in self.fulltext], [c.hit.chunk_id for c in self.vector]]

    def weights(self) -> tuple[float, float]:
        """(fulltext, vector) weights for fusing the two rankings, summing to 1.

        The fulltext ranking counts for more the more of the question's terms its best hits hold: a question
        whose words stand together in a passage is answered there, and a vector ranking beside it mostly adds
        look-alikes. A question worded unlike the passages leans on the vector ranking.
        """
        if not self.fulltext or not self.vector:
            return (0.0, 1.0) if self.vector else (1.0, 0.0)
        coverage = max(c.term_overlap for c in self.fulltext[:_COVERAGE_DEPTH])
        return 2 * coverage / (1 + coverage), (1 - coverage) / (1 + coverage)


class ChunkSearch:
    """Both chunk searches of one KB, and the rule that admits their hits as evidence."""

    def __init__(
        self,
        kb: str,
        index: ChunkIndex,
        candidates: int,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        min_term_overlap: float = DEFAULT_MIN_TERM_OVERLAP,
    ) -> None:
        self._kb = kb
        self._index = index
        self._candidates = candidates
        self._min_similarity = min_similarity
        self._min_term_overlap = min_term_overlap

    @property
    def min_similarity(self) -> float:
        return self._min_similarity

    async def fulltext(self, query: str) -> list[ChunkHit]:
        return await self._index.search_chunks_fulltext(self._kb, query, self._candidates)

    async def vector(self, embedding: Vector) -> list[ChunkHit]:
        return await self._index.search_chunks_vector(self._kb, embedding, self._candidates)

    async def rankings(self, text: str, embedder: TextEmbedder) -> ChunkRankings:
        """Both searches for `text`, admitted; the vector side only in a language the embedder covers."""

        async def vector_hits() -> list[ChunkHit]:
            if not embedder.covers(text):
                return []  # the model's vector of this language would be noise
            return await self.vector((await embedder.embed([text]))[0])

        fulltext_hits, found_by_vector = await concurrently(self.fulltext(text), vector_hits())
        return self.admit(text, fulltext_hits, found_by_vector)

    def admit(self, query: str, fulltext_hits: Sequence[ChunkHit], vector_hits: Sequence[ChunkHit]) -> ChunkRankings:
        terms = fulltext_query_terms(query)
        cosines = {hit.chunk_id: hit.score for hit in vector_hits}
        bm25 = {hit.chunk_id: hit.score for hit in fulltext_hits}

        def candidate(hit: ChunkHit) -> ChunkCandidate:
            overlap = overlap_score(terms, f"{hit.title}\n{hit.text}")
            return ChunkCandidate(hit, cosines.get(hit.chunk_id), bm25.get(hit.chunk_id), overlap)

        vector = tuple(candidate(hit) for hit in vector_hits if hit.score >= self._min_similarity)
        fulltext = tuple(
            c
            for c in map(candidate, fulltext_hits)
            if c.term_overlap >= self._min_term_overlap or (c.cosine or 0.0) >= self._min_similarity
        )
        return ChunkRankings(fulltext, vector)

    def admit_vector(self, vector_hits: Sequence[ChunkHit]) -> tuple[ChunkCandidate, ...]:
        """Vector hits alone (for a search on other text than the question)."""
        return tuple(ChunkCandidate(h, h.score, None, 0.0) for h in vector_hits if h.score >= self._min_similarity)
