"""What every GraphStore adapter refuses, checked in one place before anything is written.

Both adapters call these first, so a malformed write fails the same way (`InvalidRequest`, nothing
stored) whichever store is behind the port.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from backend.domain.errors import InvalidRequest
from backend.domain.graph import CommunityRecord, DocumentGraph
from backend.graphrag_agent.ports import Vector


def check_document(graph: DocumentGraph, chunk_vectors: Sequence[Vector]) -> None:
    """One vector per chunk; chunks of this document with unique ids and ordinals; mentions in those
    chunks; relations joining two different entities this document mentions, with finite weights."""
    doc_id = graph.document.doc_id
    if not doc_id:
        raise InvalidRequest("a document needs a doc_id")
    chunk_ids = _check_chunks(graph, chunk_vectors)
    mentioned: set[str] = set()
    for m in graph.entity_mentions:
        if m.chunk_id not in chunk_ids:
            raise InvalidRequest(f"entity {m.entity_id} is mentioned in chunk {m.chunk_id}, not in this document")
        if not m.entity_id:
            raise InvalidRequest("an entity mention needs an entity_id")
        mentioned.add(m.entity_id)
    for r in graph.relation_mentions:
        if r.chunk_id not in chunk_ids:
            raise InvalidRequest(f"a relation is stated in chunk {r.chunk_id}, not in this document")
        if r.source_id == r.target_id or not {r.source_id, r.target_id} <= mentioned:
            raise InvalidRequest(
                f"relation {r.source_id}–{r.target_id} must join two different entities this document mentions"
            )
        if not np.isfinite(r.weight):
            raise InvalidRequest(f"relation {r.source_id}–{r.target_id} has a non-finite weight")


def _check_chunks(graph: DocumentGraph, chunk_vectors: Sequence[Vector]) -> set[str]:
    doc_id = graph.document.doc_id
    count = len(graph.chunks)
    if len(chunk_vectors) != count:
        raise InvalidRequest(f"document {doc_id}: {count} chunks but {len(chunk_vectors)} vectors")
    if any(chunk.doc_id != doc_id for chunk in graph.chunks):
        raise InvalidRequest(f"document {doc_id}: a chunk belongs to another document")
    if any(not chunk.chunk_id for chunk in graph.chunks):
        raise InvalidRequest(f"document {doc_id}: a chunk needs a chunk_id")
    chunk_ids = {chunk.chunk_id for chunk in graph.chunks}
    if len(chunk_ids) != count or len({chunk.ordinal for chunk in graph.chunks}) != count:
        raise InvalidRequest(f"document {doc_id}: chunk ids and ordinals must be unique")
    return chunk_ids


def check_communities(communities: Sequence[CommunityRecord]) -> set[str]:
    """Unique, non-empty ids; parents within the set; finite ranks. Returns the ids."""
    ids = [c.community_id for c in communities]
    if len(set(ids)) != len(ids) or not all(ids):
        raise InvalidRequest("community ids must be unique and non-empty")
    known = set(ids)
    for c in communities:
        if c.parent_id is not None and (c.parent_id not in known or c.parent_id == c.community_id):
            raise InvalidRequest(
                f"community {c.community_id}: parent {c.parent_id} is not another community of the set"
            )
        if not np.isfinite(c.rank):
            raise InvalidRequest(f"community {c.community_id} has a non-finite rank")
    return known


def utc_timestamp(value: datetime | None = None) -> str:
    """ISO-8601 in UTC (a naive datetime is taken to be UTC already)."""
    moment = value or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()
