"""Caller input checked and turned into query parameters before any transaction starts.

The rules are the port's (and the embedded store's): malformed input raises `InvalidRequest` and nothing
is written. A document's chunks belong to it and have one finite vector each, of one dimension; every
mention points at one of its chunks; every relation joins two different entities the document mentions;
a community's parent is another community of the same set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from backend.domain.errors import InvalidRequest
from backend.domain.graph import ChunkRecord, CommunityRecord, DocumentGraph
from backend.graphrag_agent.ports import Vector
from backend.graphrag_agent.text import fulltext_terms
from backend.infrastructure.graph_store.merge import relation_key
from backend.infrastructure.graph_store.profile import document_profile
from backend.infrastructure.graph_store.validation import check_communities, check_document, utc_timestamp

Params = dict[str, Any]

# Lucene refuses a term over 32766 UTF-8 bytes (and would fail the whole write): longer "words" are not
# indexed. 4096 characters stay under that limit in any script.
MAX_TERM_CHARS = 4096


def indexed_terms(text: str) -> str:
    """`text` as the fulltext indexes store it: its index terms, space-separated."""
    return " ".join(term for term in fulltext_terms(text) if len(term) <= MAX_TERM_CHARS)


def _key(*parts: str) -> str:
    """A fixed-size, unambiguous key of `parts`: small enough for any index, whatever their length."""
    encoded = json.dumps(list(parts), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()


def node_uid(kb: str, local_id: str) -> str:
    """The globally unique key of a KB's node (document, chunk, entity or community)."""
    return _key(kb, local_id)


def pair_uid(kb: str, source_id: str, target_id: str) -> str:
    """The key of an (ordered) entity pair's relation mentions."""
    return _key(kb, source_id, target_id)


def source_key(source: str) -> str:
    return _key(source)[:32]


def kb_token(kb: str) -> str:
    """One short, whitespace- and operator-free token per KB: indexed (range and Lucene) instead of the name."""
    return "kb" + _key(kb)[:32]


def kb_scope(kb: str) -> Params:
    """The parameters every KB-wide query takes: the token to seek by, the name to check."""
    return {"kb": kb, "kbt": kb_token(kb)}


class QuietList(list[Any]):
    """A list the driver packs like any other but whose repr is short. neo4j 6.4 builds the repr of every query's
    parameters for its debug log before it checks the log level, which for a batch of vectors costs far more than
    packing them (benchmarks/REPORT.md, indexing)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} values>"


def quiet(params: Mapping[str, Any]) -> Params:
    """`params` with every list a `QuietList`: what the store hands the driver, reads and writes alike (a list
    holds the vectors and the batches of rows)."""
    return {name: QuietList(value) if isinstance(value, list) else value for name, value in params.items()}


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A checked vector: `values` is None for a zero vector (it has no direction to index)."""

    values: list[float] | None
    dimension: int


def stored_vector(vector: Vector, what: str) -> StoredVector:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.size == 0 or not np.all(np.isfinite(array)):
        raise InvalidRequest(f"{what} has an empty or non-finite embedding")
    values = array.tolist() if np.any(array) else None  # tolist: Python floats, converted in C
    return StoredVector(values, int(array.size))


def one_dimension(vectors: Sequence[StoredVector], what: str) -> int | None:
    dimensions = {v.dimension for v in vectors}
    if len(dimensions) > 1:
        raise InvalidRequest(f"the {what} embeddings have different dimensions: {sorted(dimensions)}")
    return dimensions.pop() if dimensions else None


# -- documents ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DocumentParams:
    kb: str
    uid: str
    document: Params  # created_at is None when the caller gave none (keep the stored one, or now)
    chunks: list[Params]
    next: list[list[str]]
    entities: list[Params]
    mentions: list[Params]
    relation_mentions: list[Params]
    entity_ids: frozenset[str]
    relation_pairs: frozenset[tuple[str, str]]
    chunk_dimension: int | None
    entity_dimension: int | None
    profile_terms: list[str]  # the document's routing terms (`graph_store/profile.py`), sorted
    profile_chunks: list[int]  # how many of its chunks hold each


def document_params(
    kb: str, graph: DocumentGraph, chunk_vectors: Sequence[Vector], entity_vectors: Mapping[str, Vector]
) -> DocumentParams:
    document = graph.document
    check_document(graph, chunk_vectors)
    vectors = [stored_vector(v, f"chunk {c.chunk_id}") for c, v in zip(graph.chunks, chunk_vectors, strict=True)]
    mentions = _mentions(kb, graph)
    mentioned = {m.entity_id for m in graph.entity_mentions}
    offered = {e: stored_vector(v, f"entity {e}") for e, v in entity_vectors.items() if e in mentioned}
    relation_mentions = _relation_mentions(kb, graph)
    profile = document_profile(graph)
    return DocumentParams(
        kb=kb,
        uid=node_uid(kb, document.doc_id),
        document={
            "id": document.doc_id,
            "title": document.title,
            "metadata": json.dumps(document.metadata, ensure_ascii=False, sort_keys=True, default=str),
            "source": document.source,
            "skey": source_key(document.source),
            "chunk_count": len(graph.chunks),
            "created_at": utc_timestamp(document.created_at) if document.created_at else None,
        },
        chunks=[_chunk(kb, document.title, c, v) for c, v in zip(graph.chunks, vectors, strict=True)],
        next=_next_links(kb, graph.chunks),
        entities=[_entity(kb, e, offered.get(e)) for e in sorted(mentioned)],
        mentions=mentions,
        relation_mentions=relation_mentions,
        entity_ids=frozenset(mentioned),
        relation_pairs=frozenset((m["source_id"], m["target_id"]) for m in relation_mentions),
        chunk_dimension=one_dimension(vectors, "chunk"),
        entity_dimension=one_dimension(list(offered.values()), "entity"),
        profile_terms=list(profile),
        profile_chunks=list(profile.values()),
    )


def _chunk(kb: str, title: str, chunk: ChunkRecord, vector: StoredVector) -> Params:
    return {
        "uid": node_uid(kb, chunk.chunk_id),
        "id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "ordinal": chunk.ordinal,
        "text": chunk.text,
        "start": chunk.start,
        "end": chunk.end,
        # The title's terms go with every chunk so that a question naming the document finds its chunks.
        "terms": indexed_terms(f"{title}\n{chunk.text}"),
        "embedding": vector.values,
        "has_embedding": True,
    }


def _next_links(kb: str, chunks: Sequence[ChunkRecord]) -> list[list[str]]:
    ordered = sorted(chunks, key=lambda c: c.ordinal)
    return [[node_uid(kb, a.chunk_id), node_uid(kb, b.chunk_id)] for a, b in pairwise(ordered)]


def _entity(kb: str, entity_id: str, vector: StoredVector | None) -> Params:
    return {
        "uid": node_uid(kb, entity_id),
        "id": entity_id,
        "embedding": vector.values if vector else None,
        "has_embedding": vector is not None,
    }


def _mentions(kb: str, graph: DocumentGraph) -> list[Params]:
    rows: list[Params] = []
    for m in graph.entity_mentions:
        rows.append(
            {
                "chunk": node_uid(kb, m.chunk_id),
                "entity": node_uid(kb, m.entity_id),
                "name": m.name,
                "type": m.type,
                "description": m.description,
            }
        )
    # Entity order: concurrent writes lock shared entities in the same order (fewer deadlock retries).
    return sorted(rows, key=lambda row: (row["entity"], row["chunk"]))


def _relation_mentions(kb: str, graph: DocumentGraph) -> list[Params]:
    doc_uid = node_uid(kb, graph.document.doc_id)
    rows: list[Params] = []
    for m in graph.relation_mentions:
        source, target = relation_key(m.source_id, m.target_id)
        rows.append(
            {
                "doc": doc_uid,
                "pair": pair_uid(kb, source, target),
                "source_id": source,
                "target_id": target,
                "chunk_id": m.chunk_id,
                "description": m.description,
                "weight": float(m.weight),
            }
        )
    return rows


# -- communities ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommunityParams:
    kb: str
    rows: list[Params]
    members: list[Params]
    parents: list[Params]
    keep: list[str]
    unvectored: list[str]  # kept communities given no vector keep the stored one
    dimension: int | None  # of the vectors given


def community_params(kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]) -> CommunityParams:
    known = check_communities(communities)
    ids = [c.community_id for c in communities]
    given = {cid: stored_vector(v, f"community {cid}") for cid, v in vectors.items() if cid in known}
    dimension = one_dimension(list(given.values()), "community")
    return CommunityParams(
        kb=kb,
        rows=[_community(kb, c, given.get(c.community_id)) for c in communities],
        members=[
            {"community": node_uid(kb, c.community_id), "members": [node_uid(kb, e) for e in sorted(set(c.entity_ids))]}
            for c in communities
        ],
        parents=[
            {"child": node_uid(kb, c.community_id), "parent": node_uid(kb, c.parent_id)}
            for c in communities
            if c.parent_id is not None
        ],
        keep=[node_uid(kb, cid) for cid in ids],
        unvectored=[node_uid(kb, cid) for cid in ids if cid not in given],
        dimension=dimension,
    )


def _community(kb: str, community: CommunityRecord, vector: StoredVector | None) -> Params:
    return {
        "uid": node_uid(kb, community.community_id),
        "id": community.community_id,
        "level": community.level,
        "title": community.title,
        "summary": community.summary,
        "rank": float(community.rank),
        "embedding": vector.values if vector else None,
        "has_embedding": vector is not None,
    }
