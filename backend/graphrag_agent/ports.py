"""What the core needs from the outside world."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord

# Plain data, so the use cases can type an agent's answer too; re-exported with the agent contract below.
from backend.domain.retrieval import AgentTrace as AgentTrace

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """A chunk found by one search. `score` is the search's own score (BM25 or cosine)."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    ordinal: int
    score: float


class ChunkIndex(Protocol):
    """Chunk search inside one KB. Implementations never format `query` into query text."""

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]: ...

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]: ...

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of these chunks (a chunk without one, or unknown, is left out)."""
        ...


@dataclass(frozen=True, slots=True)
class TermCounts:
    """A KB's profile for some routing terms (`routing_terms.py`): its chunk count and how many chunks hold each
    term (a term none holds is left out)."""

    chunks: int
    frequencies: Mapping[str, int]


class TermProfiles(Protocol):
    """Each KB's routing-term profile, kept by the store in the transaction that writes or deletes a document."""

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        """Every KB of `kbs` (one unknown or empty holds 0 chunks), in one read whatever their number."""
        ...


@dataclass(frozen=True, slots=True)
class EntityHit:
    entity: EntityRecord
    score: float  # the search's own score (BM25 or cosine)


@dataclass(frozen=True, slots=True)
class CommunityHit:
    community: CommunityRecord
    score: float  # cosine similarity of the community summary to the query


class GraphReader(ChunkIndex, Protocol):
    """Read access to one store's knowledge graph, for the agents. Every method is scoped to one KB."""

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        """Entities whose names match the query's terms (never formatted into query text)."""
        ...

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]: ...

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        """The entities that exist, in the order of `entity_ids`."""
        ...

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        """Relations touching any of the entities, strongest (highest weight) first, ties by ids."""
        ...

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        """Chunks that mention any of the entities; `score` = how many of them the chunk mentions.

        Ordered by score, then document title and ordinal.
        """
        ...

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        """The chunks that exist, in the order of `chunk_ids`, with score 0."""
        ...

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """chunk id → the ids of the entities it mentions (sorted)."""
        ...

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        """entity id → the ids of up to `per_entity_limit` chunks that mention it: those of its own document
        first (titled with its name, ignoring case, a leading article and a trailing "(…)"), then by title,
        ordinal."""
        ...

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        """The communities (every level) that contain any of the entities, by level then rank (desc)."""
        ...

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        """Communities ranked by the cosine of their summary embedding to `embedding`."""
        ...

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        """By level, then rank (desc), then id."""
        ...


class TextEmbedder(Protocol):
    """Dense, L2-normalised sentence embeddings."""

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text, shape (len(texts), dimension)."""
        ...

    def covers(self, text: str) -> bool:
        """Does the model embed the language of `text` meaningfully? Otherwise its vectors are noise,
        and searches skip the vector side wherever a fulltext search covers the same ground."""
        ...


class RetrievalAgent(Protocol):
    """The agent contract (SPEC §3): stateless, retrieve-only."""

    @property
    def agent_type(self) -> str: ...

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace: ...
