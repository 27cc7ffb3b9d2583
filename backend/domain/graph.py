"""The knowledge graph as plain data (SPEC §8): documents, chunks, entities, relations, communities.

Ids are stable and derived from content: a document id is a hash of its content, a chunk id a hash
of (document id, ordinal), an entity id a hash of (kb, normalised name). Vectors are not part of
these records; the stores take them alongside.
"""

from __future__ import annotations

from collections.abc import Sequence
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
class StoredDocument:
    """A document as a reader gets it back: its record, and its chunks in order."""

    record: DocumentRecord
    chunks: tuple[ChunkRecord, ...]

    @property
    def text(self) -> str:
        return joined_text(self.chunks)


def joined_text(chunks: Sequence[ChunkRecord]) -> str:
    """The text the chunks (in order) were cut from, at the offsets they were cut at.

    Chunks are slices of the text (`start`, `end`) that overlap or leave out the whitespace between them; each
    adds what the ones before it did not hold. Whitespace left out comes back as as many characters: one as a
    space, more as line breaks (a paragraph's end). Chunks whose offsets do not match their text are joined by
    blank lines.
    """
    if not _offsets_hold(chunks):
        return "\n\n".join(chunk.text for chunk in chunks)
    parts: list[str] = []
    end = 0
    for chunk in chunks:
        gap = chunk.start - end
        if gap > 0:
            parts.append(" " if gap == 1 else "\n" * gap)
        parts.append(chunk.text[max(0, -gap) :])
        end = max(end, chunk.end)
    return "".join(parts)


def _offsets_hold(chunks: Sequence[ChunkRecord]) -> bool:
    starts = [chunk.start for chunk in chunks]
    return starts == sorted(starts) and all(c.start >= 0 and c.end - c.start == len(c.text) for c in chunks)


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
