"""Plain chunk retrieval: fulltext and vector search with admission thresholds, and relevance feedback.

A vector hit counts only when its cosine similarity clears a threshold, and a fulltext hit only when
it covers enough of the question's content terms (or is semantically close), so a question the KB
knows nothing about gets no evidence instead of the nearest unrelated chunks. A third, feedback search
starts from the question moved towards its best fulltext hits; a search may be restricted to documents
of some dates (dates.py). The thresholds and depths are the agent's `ChunkSearchSettings` (tuning.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date

import numpy as np

from backend.graphrag_agent.agents.common import concurrently
from backend.graphrag_agent.agents.tuning import ChunkSearchSettings
from backend.graphrag_agent.dates import DateScope, document_date
from backend.graphrag_agent.ports import ChunkHit, ChunkIndex, TextEmbedder, Vector
from backend.graphrag_agent.text import TermSets, fulltext_query_terms, index_term_set, overlap_score

# The rankings of one text's searches, in the order `ChunkRankings.weighted_lists` gives them.
RANKING_NAMES = ("fulltext", "vector", "feedback")


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
    feedback: tuple[ChunkCandidate, ...] = ()  # the vector search repeated from the best fulltext hits

    def by_id(self) -> dict[str, ChunkCandidate]:
        return {c.hit.chunk_id: c for c in (*self.feedback, *self.vector, *self.fulltext)}

    def weighted_lists(
        self, settings: ChunkSearchSettings, feedback_share: float = 1.0
    ) -> list[tuple[str, list[str], float]]:
        """(name, chunk ids, fusion weight) of each search that admitted something; the feedback ranking's weight
        times `feedback_share` (less where another ranking already reaches beyond the question's words)."""
        fulltext_weight, vector_weight = self.weights(settings)
        lists = zip(
            RANKING_NAMES,
            (self.fulltext, self.vector, self.feedback),
            (fulltext_weight, vector_weight, settings.feedback_weight * feedback_share),
            strict=True,
        )
        return [(name, [c.hit.chunk_id for c in found], weight) for name, found, weight in lists if found]

    def weights(self, settings: ChunkSearchSettings) -> tuple[float, float]:
        """(fulltext, vector) weights for fusing the two rankings, summing to 1.

        The fulltext ranking counts for more the more of the question's terms its best hits hold: a question
        whose words stand together in a passage is answered there, and a vector ranking beside it mostly adds
        look-alikes. A question worded unlike the passages leans on the vector ranking.
        """
        if not self.fulltext or not self.vector:
            return (0.0, 1.0) if self.vector else (1.0, 0.0)
        coverage = max(c.term_overlap for c in self.fulltext[: settings.coverage_depth])
        return 2 * coverage / (1 + coverage), (1 - coverage) / (1 + coverage)


class ChunkSearch:
    """Both chunk searches of one KB, and the rule that admits their hits as evidence."""

    def __init__(
        self,
        kb: str,
        index: ChunkIndex,
        candidates: int,
        settings: ChunkSearchSettings,
        term_sets: TermSets = index_term_set,
    ) -> None:
        self._kb = kb
        self._index = index
        self._candidates = candidates
        self._settings = settings
        self._term_sets = term_sets

    async def fulltext(self, query: str, depth: int | None = None) -> list[ChunkHit]:
        return await self._index.search_chunks_fulltext(self._kb, query, depth or self._candidates)

    async def vector(self, embedding: Vector, depth: int | None = None) -> list[ChunkHit]:
        return await self._index.search_chunks_vector(self._kb, embedding, depth or self._candidates)

    async def chunk_embeddings(self, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return await self._index.chunk_embeddings(self._kb, chunk_ids)

    async def rankings(self, text: str, embedder: TextEmbedder, scope: DateScope | None = None) -> ChunkRankings:
        """Both searches for `text`, admitted, and the feedback search from the best fulltext hits; the vector
        searches only in a language the embedder covers.

        With a `scope`, only chunks of documents dated in it (see dates.py), from a deeper search.
        """
        depth = self._candidates * self._settings.scoped_depth if scope is not None else self._candidates

        async def vector_search() -> tuple[Vector | None, list[ChunkHit]]:
            if not embedder.covers(text):
                return None, []  # the model's vector of this language would be noise
            embedding = (await embedder.embed([text]))[0]
            return embedding, await self.vector(embedding, depth)

        fulltext_hits, (embedding, vector_hits) = await concurrently(self.fulltext(text, depth), vector_search())
        found = self.admit(text, _in_scope(fulltext_hits, scope), _in_scope(vector_hits, scope))
        return await self.with_feedback(found, embedding, depth, scope)

    async def with_feedback(
        self, found: ChunkRankings, embedding: Vector | None, depth: int | None = None, scope: DateScope | None = None
    ) -> ChunkRankings:
        """`found` with the feedback search added: when there is a question vector (None: a language the embedder
        does not cover) and fulltext admitted something to learn from."""
        if embedding is None or not found.fulltext:
            return found
        expanded = await self._feedback_query(embedding, found.fulltext[: self._settings.feedback_documents])
        if expanded is None:
            return found
        hits = _in_scope(await self.vector(expanded, depth), scope)
        return replace(found, feedback=self.admit_vector(hits))

    async def _feedback_query(self, embedding: Vector, best: Sequence[ChunkCandidate]) -> Vector | None:
        """The question's unit vector plus the mean unit vector of `best` (None without stored vectors)."""
        stored = await self.chunk_embeddings([c.hit.chunk_id for c in best])
        question = _unit(embedding)
        passages = [unit for unit in map(_unit, stored.values()) if unit is not None]
        if question is None or not passages:
            return None
        centroid: Vector = np.mean(np.stack(passages), axis=0).astype(np.float32)
        return question + centroid

    def admit(self, query: str, fulltext_hits: Sequence[ChunkHit], vector_hits: Sequence[ChunkHit]) -> ChunkRankings:
        terms = fulltext_query_terms(query)
        cosines = {hit.chunk_id: hit.score for hit in vector_hits}
        bm25 = {hit.chunk_id: hit.score for hit in fulltext_hits}

        def candidate(hit: ChunkHit) -> ChunkCandidate:
            overlap = overlap_score(terms, f"{hit.title}\n{hit.text}", self._term_sets)
            return ChunkCandidate(hit, cosines.get(hit.chunk_id), bm25.get(hit.chunk_id), overlap)

        floor = self._settings.min_similarity
        vector = tuple(candidate(hit) for hit in vector_hits if hit.score >= floor)
        fulltext = tuple(
            c
            for c in map(candidate, fulltext_hits)
            if c.term_overlap >= self._settings.min_term_overlap or (c.cosine or 0.0) >= floor
        )
        return ChunkRankings(fulltext, vector)

    def admit_vector(self, vector_hits: Sequence[ChunkHit]) -> tuple[ChunkCandidate, ...]:
        """Vector hits alone (for a search on other text than the question)."""
        floor = self._settings.min_similarity
        return tuple(ChunkCandidate(h, h.score, None, 0.0) for h in vector_hits if h.score >= floor)


def _in_scope(hits: list[ChunkHit], scope: DateScope | None) -> list[ChunkHit]:
    return hits if scope is None else [hit for hit in hits if scope.contains(hit_date(hit))]


def hit_date(hit: ChunkHit) -> date | None:
    """The date of the chunk's document: from its title, or the header line of its first chunk."""
    first_line = hit.text.split("\n", 1)[0] if hit.ordinal == 0 else ""
    return document_date(hit.title, first_line)


def _unit(vector: Vector) -> Vector | None:
    norm = float(np.linalg.norm(vector))
    return vector / np.float32(norm) if norm > 0 and np.isfinite(norm) else None
