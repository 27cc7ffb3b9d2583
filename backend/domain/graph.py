"""The knowledge graph as plain data (SPEC §8): documents, chunks, entities, relations, communities.

Ids are stable and derived from content: a document id is a hash of its content, a chunk id a hash
of (document id, ordinal), an entity id a hash of (kb, normalised name). Vectors are not part of
these records; the stores take them alongside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    doc_id: str
    title: str
    metadata: dict[str, Any] = field(default_factory=dict)
    # Where the document came from (a file path, a client's id): re-ingesting changed content under
    # the same source replaces the old version.
    source: str = ""
    chunk_count: int = 0
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    chunk_id: str
    doc_id: str
    ordinal: int
    text: str
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class EntityMention:
    """An entity as one chunk describes it."""

    entity_id: str
    name: str
    type: str
    description: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class RelationMention:
    """A relation between two entities as one chunk states it (undirected for retrieval)."""

    source_id: str
    target_id: str
    description: str
    weight: float
    chunk_id: str


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor found in one document's chunks."""

    entity_mentions: tuple[EntityMention, ...]
    relation_mentions: tuple[RelationMention, ...]
    model_calls: int = 0  # LLM calls actually made (cache misses, retries included)
    cache_hits: int = 0
    fallbacks: int = 0  # chunks whose model answer did not parse, extracted offline instead


@dataclass(frozen=True, slots=True)
class DocumentGraph:
    """Everything one document contributes to the graph; written in one transaction."""

    document: DocumentRecord
    chunks: tuple[ChunkRecord, ...]
    entity_mentions: tuple[EntityMention, ...] = ()
    relation_mentions: tuple[RelationMention, ...] = ()


@dataclass(frozen=True, slots=True)
class EntityRecord:
    """An entity merged over all its mentions in a KB."""

    entity_id: str
    name: str
    type: str
    description: str
    mention_count: int = 0


@dataclass(frozen=True, slots=True)
class RelationRecord:
    """A relation merged over all chunks that state it; `weight` is the sum of their weights."""

    source_id: str
    target_id: str
    description: str
    weight: float
    chunk_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommunityRecord:
    """A community of entities at one level of the hierarchy (0 is the coarsest)."""

    community_id: str
    level: int
    title: str
    summary: str
    rank: float
    entity_ids: tuple[str, ...]
    parent_id: str | None = None


@dataclass(frozen=True, slots=True)
class EntityGraph:
    """The weighted entity–entity graph of a KB, as community detection needs it."""

    entity_ids: tuple[str, ...]
    edges: tuple[tuple[str, str, float], ...]


@dataclass(frozen=True, slots=True)
class BuiltCommunities:
    """Every community of every level; `summarized` + `reused` == len(records)."""

    records: list[CommunityRecord]
    summarized: int
    reused: int
