"""The GraphStore port: the knowledge graph's write side plus the agents' read side (SPEC §8).

Two adapters implement it — Neo4j and the embedded SQLite store — and both pass one contract suite
(`tests/contract/test_graph_store.py`). Merge rules are shared (`infrastructure/graph_store/merge.py`) so
that the two stores return identical values for the same writes.

Rules every adapter follows:
- Every record carries its KB; every query filters by KB through a parameter. Ids are unique per KB
  (entity, chunk and community ids are derived from the KB), and the same document can live in two
  KBs without either seeing the other.
- `upsert_document` writes one document's whole contribution in one transaction: a reader sees all
  of it or none of it. Entities are merged by id across documents; relations by their unordered
  pair of entity ids. `upsert_documents` writes several the same way, each still all-or-none; a store
  may group them into fewer transactions (it saves Neo4j a commit and a merge per document).
- Each KB's routing profile (`TermProfiles`: its chunk count, and per routing term the chunks that hold it) is
  changed in the transaction that writes, replaces or deletes a document, so it never disagrees with the chunks.
- `delete_document` removes the document, its chunks and their mentions; entities and relations
  left without any mention are removed with their community memberships; the merged description,
  type and weight of what remains are recomputed from the remaining mentions.
- User text is never formatted into query text (SQL or Cypher): values are always parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from backend.domain.graph import ChunkRecord, CommunityRecord, DocumentGraph, DocumentRecord, EntityGraph
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.graphrag_agent.ports import GraphReader, TermProfiles, Vector


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document for `upsert_documents`: as the arguments of `upsert_document`."""

    graph: DocumentGraph
    chunk_vectors: Sequence[Vector]
    entity_vectors: Mapping[str, Vector]


class BulkLoad(Protocol):
    """What a load tells the store while inside `GraphStore.bulk_load`."""

    async def documents_written(self) -> None:
        """Every document of the load is written: what follows (the community refresh) adds no chunk or entity."""
        ...


@dataclass(frozen=True, slots=True)
class GraphCounts:
    documents: int = 0
    chunks: int = 0
    entities: int = 0
    relations: int = 0
    communities: int = 0


class GraphStore(GraphReader, TermProfiles, Protocol):
    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless the store answers."""
        ...

    async def close(self) -> None: ...

    # -- knowledge bases created at run time (the registry file holds the others) --------------

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        """Store `kb` unless a KB of its prefix is stored: True if this call stored it. Atomic in the store, so
        of concurrent creations of one prefix (from any number of processes) exactly one returns True, and its
        definition is the one kept; a stored KB is never changed."""
        ...

    async def list_knowledge_bases(self) -> list[KnowledgeBase]: ...

    # -- documents ------------------------------------------------------------------------------

    async def get_document(self, kb: str, doc_id: str) -> DocumentRecord | None: ...

    async def document_chunks(self, kb: str, doc_id: str) -> list[ChunkRecord]:
        """The document's chunks by ordinal, with the offsets they were cut at; [] for a document not held."""
        ...

    async def list_documents(self, kb: str) -> list[DocumentRecord]:
        """Ordered by title, then doc_id."""
        ...

    async def find_documents_by_source(self, kb: str, source: str) -> list[DocumentRecord]: ...

    async def existing_document_ids(self, kb: str, doc_ids: Sequence[str]) -> set[str]:
        """Which of `doc_ids` the KB holds: one read for a batch, where `get_document` is one per document."""
        ...

    async def existing_entity_ids(self, kb: str, entity_ids: Sequence[str]) -> set[str]: ...

    async def upsert_document(
        self,
        kb: str,
        graph: DocumentGraph,
        chunk_vectors: Sequence[Vector],
        entity_vectors: Mapping[str, Vector],
    ) -> None:
        """Write a document atomically. `chunk_vectors[i]` belongs to `graph.chunks[i]`;
        `entity_vectors` holds vectors for entities new to the KB (existing ones keep theirs).
        Writing a document whose id already exists in the KB replaces it."""
        ...

    async def upsert_documents(self, kb: str, documents: Sequence[DocumentWrite]) -> None:
        """`upsert_document` for each, in order (a later one with the same id replaces an earlier one)."""
        ...

    async def delete_document(self, kb: str, doc_id: str) -> bool:
        """Remove a document and everything only it supported; False if it did not exist."""
        ...

    # -- communities ------------------------------------------------------------------------------

    async def entity_graph(self, kb: str) -> EntityGraph:
        """All entity ids (sorted) and relations as (source, target, weight), source < target."""
        ...

    async def replace_communities(
        self, kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]
    ) -> None:
        """Atomically make `communities` the KB's whole community set (memberships and PARENT links
        included). `vectors` holds summary embeddings for communities whose id is new to the KB; a
        community whose id already exists keeps its stored embedding when `vectors` has none for it."""
        ...

    async def counts(self, kb: str) -> GraphCounts: ...

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview:
        """The KB's document count, up to `entities` entity names by mention count (desc), then name, then id,
        and up to `titles` non-empty document titles by chunk count (desc), then title, then id."""
        ...

    def bulk_load(self, documents: int) -> AbstractAsyncContextManager[BulkLoad]:
        """Bracket a load of up to `documents` documents and the community refresh after it.

        A store whose search indexes cost more to keep up write by write than to build once may suspend them
        on entry and build them again: from `documents_written()` on (the refresh overlaps the build), at the
        latest on exit, which returns once they serve again, also when the load failed. Searches stay correct
        meanwhile (slower, or waiting for the build). A store that cannot build them on exit logs it: they are
        built when the store is next opened."""
        ...
