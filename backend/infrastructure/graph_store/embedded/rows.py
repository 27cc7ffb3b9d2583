"""Caller input checked and turned into table rows before any transaction starts.

Malformed input raises `InvalidRequest` here, so a write transaction only ever holds consistent rows:
- `chunk_vectors` has one finite vector per chunk, all of one dimension;
- every chunk belongs to the document, chunk ids and ordinals are unique;
- every mention points at a chunk of this document;
- every relation joins two different entities that this document mentions (so an entity that loses its
  last mention can never leave a relation behind).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.domain.errors import InvalidRequest
from backend.domain.graph import CommunityRecord, DocumentGraph, DocumentRecord
from backend.graphrag_agent.ports import Vector
from backend.graphrag_agent.text import fulltext_terms
from backend.infrastructure.graph_store.embedded.profile import profile_json
from backend.infrastructure.graph_store.embedded.schema import kb_token
from backend.infrastructure.graph_store.merge import relation_key
from backend.infrastructure.graph_store.profile import document_profile
from backend.infrastructure.graph_store.validation import check_communities, check_document, utc_timestamp

ChunkRow = tuple[str, str, str, int, str, int, int, bytes]
MentionRow = tuple[str, str, str, int, str, str, str, str]
RelationMentionRow = tuple[str, str, str, str, int, str, str, float]
CommunityRow = tuple[str, str, int, str, str, float, str | None, bytes | None]


@dataclass(frozen=True, slots=True)
class DocumentRows:
    kb: str
    doc_id: str
    document: DocumentRecord
    created_at: str | None  # None: keep the stored one, or now for a new document
    chunks: list[ChunkRow]
    chunk_terms: list[tuple[str, str, str, str]]  # (terms, kb token, kb, chunk_id)
    profile: str  # JSON: routing term → chunks of the document that hold it (`graph_store/profile.py`)
    chunk_dimension: int | None
    entity_mentions: list[MentionRow]
    relation_mentions: list[RelationMentionRow]
    entity_vectors: dict[str, bytes]
    entity_dimension: int | None

    @property
    def entity_ids(self) -> set[str]:
        return {row[1] for row in self.entity_mentions}

    @property
    def relation_keys(self) -> set[tuple[str, str]]:
        return {(row[1], row[2]) for row in self.relation_mentions}


@dataclass(frozen=True, slots=True)
class CommunityRows:
    communities: list[CommunityRow]  # embedding None: keep the stored one, if the id has one
    members: list[tuple[str, str]]  # (community_id, json list of entity ids)


def vector_bytes(vector: Vector, what: str) -> bytes:
    """A finite, non-empty vector as little-endian float32 bytes."""
    array = np.asarray(vector, dtype="<f4").reshape(-1)
    if array.size == 0 or not np.all(np.isfinite(array)):
        raise InvalidRequest(f"{what} has an empty or non-finite embedding")
    return array.tobytes()


def one_dimension(blobs: Sequence[bytes], what: str) -> int | None:
    widths = {len(blob) // 4 for blob in blobs}
    if len(widths) > 1:
        raise InvalidRequest(f"the {what} embeddings have different dimensions: {sorted(widths)}")
    return widths.pop() if widths else None


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def document_rows(
    kb: str, graph: DocumentGraph, chunk_vectors: Sequence[Vector], entity_vectors: Mapping[str, Vector]
) -> DocumentRows:
    """The rows of one document (its stored `chunk_count` is the number of chunks given, whatever the record says)."""
    document = graph.document
    check_document(graph, chunk_vectors)
    chunks = [
        (kb, c.chunk_id, c.doc_id, c.ordinal, c.text, c.start, c.end, vector_bytes(v, f"chunk {c.chunk_id}"))
        for c, v in zip(graph.chunks, chunk_vectors, strict=True)
    ]
    mentions = _entity_mention_rows(kb, graph)
    mentioned = {row[1] for row in mentions}
    vectors = {eid: vector_bytes(v, f"entity {eid}") for eid, v in entity_vectors.items() if eid in mentioned}
    return DocumentRows(
        kb=kb,
        doc_id=document.doc_id,
        document=document,
        created_at=utc_timestamp(document.created_at) if document.created_at else None,
        chunks=chunks,
        # The title's terms go with every chunk so that a question naming the document finds its chunks.
        chunk_terms=[
            (" ".join(fulltext_terms(f"{document.title}\n{c.text}")), kb_token(kb), kb, c.chunk_id)
            for c in graph.chunks
        ],
        profile=profile_json(document_profile(graph)),
        chunk_dimension=one_dimension([row[7] for row in chunks], "chunk"),
        entity_mentions=mentions,
        relation_mentions=_relation_mention_rows(kb, graph),
        entity_vectors=vectors,
        entity_dimension=one_dimension(list(vectors.values()), "entity"),
    )


def _entity_mention_rows(kb: str, graph: DocumentGraph) -> list[MentionRow]:
    rows: list[MentionRow] = []
    for position, m in enumerate(graph.entity_mentions):
        rows.append((kb, m.entity_id, m.chunk_id, position, graph.document.doc_id, m.name, m.type, m.description))
    return rows


def _relation_mention_rows(kb: str, graph: DocumentGraph) -> list[RelationMentionRow]:
    rows: list[RelationMentionRow] = []
    for position, m in enumerate(graph.relation_mentions):
        source, target = relation_key(m.source_id, m.target_id)
        doc_id = graph.document.doc_id
        rows.append((kb, source, target, m.chunk_id, position, doc_id, m.description, float(m.weight)))
    return rows


def community_rows(kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]) -> CommunityRows:
    known = check_communities(communities)
    blobs = {cid: vector_bytes(v, f"community {cid}") for cid, v in vectors.items() if cid in known}
    return CommunityRows(
        communities=[
            (kb, c.community_id, c.level, c.title, c.summary, float(c.rank), c.parent_id, blobs.get(c.community_id))
            for c in communities
        ],
        members=[(c.community_id, json.dumps(sorted(set(c.entity_ids)))) for c in communities],
    )
