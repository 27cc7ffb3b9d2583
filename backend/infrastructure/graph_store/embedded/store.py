"""The embedded GraphStore: the whole knowledge graph of every KB in one SQLite file, no server.

- one writer connection (writes are serialised) and a small pool of reader connections, WAL mode:
  every write is one transaction, so readers see a document, a deletion or a community set whole or not at all;
- SQLite runs in worker threads; when the awaiting task is cancelled the running statement is interrupted
  and the call returns only after the thread has stopped;
- fulltext search is FTS5 bm25 over pre-tokenised terms (CJK as jieba words), the query's terms
  quoted and bound as one parameter; vector search is cosine over a cached matrix per (KB, kind), and the
  communities with their members are parsed once per revision (community_cache.py);
- sqlite errors surface as `StoreUnavailable`, malformed input as `InvalidRequest`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeVar

from backend.application.ports.graph_store import BulkLoad, DocumentWrite, GraphCounts
from backend.domain.errors import KnowledgeStoreUnavailable
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentRecord,
    EntityGraph,
    EntityRecord,
    RelationRecord,
)
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, TermCounts, Vector
from backend.infrastructure.graph_store.base import GraphStoreBase, capped
from backend.infrastructure.graph_store.bulk_load import bulk_load_without_suspension
from backend.infrastructure.graph_store.embedded import profile, reads, writes
from backend.infrastructure.graph_store.embedded.community_cache import CommunityCache
from backend.infrastructure.graph_store.embedded.connection import (
    CancellableConnection,
    in_transaction,
    open_connections,
    read_snapshot,
)
from backend.infrastructure.graph_store.embedded.rows import community_rows, document_rows
from backend.infrastructure.graph_store.embedded.schema import create_schema
from backend.infrastructure.graph_store.embedded.vectors import VectorCache, unit_query

T = TypeVar("T")


class EmbeddedGraphStore(GraphStoreBase):
    """Implements `GraphStore` (so also `GraphReader` and `ChunkIndex`).

    Open with `await EmbeddedGraphStore.open(path)`; `close()` when done.
    """

    def __init__(self, path: Path, writer: CancellableConnection, readers: Sequence[CancellableConnection]) -> None:
        self._path = path
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._all_readers = tuple(readers)
        self._readers: asyncio.Queue[CancellableConnection] = asyncio.Queue()
        for reader in readers:
            self._readers.put_nowait(reader)
        self._vectors = VectorCache()
        self._communities = CommunityCache()
        self._closed = False

    @classmethod
    async def open(cls, path: Path, readers: int = 2) -> EmbeddedGraphStore:
        """Open (creating it and its schema if needed) the store file at `path`."""
        if readers < 1:
            raise ValueError("readers must be at least 1")
        try:
            connections = await asyncio.to_thread(open_connections, path, readers, create_schema)
        except (sqlite3.Error, OSError) as exc:
            raise KnowledgeStoreUnavailable(f"cannot open the graph store at {path}: {exc}") from exc
        wrapped = [CancellableConnection(raw) for raw in connections]
        return cls(path, wrapped[0], wrapped[1:])

    @property
    def path(self) -> Path:
        return self._path

    async def ping(self) -> None:
        await self._read("ping", lambda raw: raw.execute("SELECT 1").fetchone())

    async def close(self) -> None:
        """Close the file once the operations in flight have finished (idempotent)."""
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            self._writer.close()
        for _ in self._all_readers:
            (await self._readers.get()).close()

    # -- knowledge bases ------------------------------------------------------------------------------

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        return await self._write("create_knowledge_base", lambda raw: writes.create_knowledge_base(raw, kb))

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        return await self._read("list_knowledge_bases", reads.list_knowledge_bases)

    # -- documents ---------------------------------------------------------------------------------------

    async def get_document(self, kb: str, doc_id: str) -> DocumentRecord | None:
        return await self._read("get_document", lambda raw: reads.get_document(raw, kb, doc_id))

    async def document_chunks(self, kb: str, doc_id: str) -> list[ChunkRecord]:
        return await self._read("document_chunks", lambda raw: reads.document_chunks(raw, kb, doc_id))

    async def list_documents(self, kb: str) -> list[DocumentRecord]:
        return await self._read("list_documents", lambda raw: reads.list_documents(raw, kb))

    async def find_documents_by_source(self, kb: str, source: str) -> list[DocumentRecord]:
        return await self._read("find_documents_by_source", lambda raw: reads.list_documents(raw, kb, source))

    async def existing_document_ids(self, kb: str, doc_ids: Sequence[str]) -> set[str]:
        if not doc_ids:
            return set()
        return await self._read("existing_document_ids", lambda raw: reads.existing_document_ids(raw, kb, doc_ids))

    async def existing_entity_ids(self, kb: str, entity_ids: Sequence[str]) -> set[str]:
        if not entity_ids:
            return set()
        return await self._read("existing_entity_ids", lambda raw: reads.existing_entity_ids(raw, kb, entity_ids))

    async def _upsert(self, operation: str, kb: str, documents: Sequence[DocumentWrite]) -> None:
        """The documents in one write transaction."""
        # Checking and tokenising long documents is CPU work: keep it off the event loop.
        batch = await asyncio.to_thread(
            lambda: [document_rows(kb, d.graph, d.chunk_vectors, d.entity_vectors) for d in documents]
        )
        await self._write(operation, lambda raw: writes.write_documents(raw, batch), kb, writes.DOCUMENT_KINDS)

    async def delete_document(self, kb: str, doc_id: str) -> bool:
        return await self._write(
            "delete_document", lambda raw: writes.delete_document(raw, kb, doc_id), kb, writes.DOCUMENT_KINDS
        )

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        if not kbs:
            return {}
        return await self._read("term_frequencies", lambda raw: profile.term_frequencies(raw, kbs, terms))

    async def counts(self, kb: str) -> GraphCounts:
        return await self._read("counts", lambda raw: reads.counts(raw, kb))

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview:
        return await self._read("overview", read_snapshot(lambda raw: reads.overview(raw, kb, entities, titles)))

    def bulk_load(self, documents: int) -> AbstractAsyncContextManager[BulkLoad]:
        return bulk_load_without_suspension()  # vectors are searched as dense matrices, rebuilt when read

    # -- communities ----------------------------------------------------------------------------------------

    async def entity_graph(self, kb: str) -> EntityGraph:
        return await self._read("entity_graph", read_snapshot(lambda raw: reads.entity_graph(raw, kb)))

    async def replace_communities(
        self, kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]
    ) -> None:
        rows = community_rows(kb, communities, vectors)
        await self._write(
            "replace_communities", lambda raw: writes.replace_communities(raw, kb, rows), kb, writes.COMMUNITY_KINDS
        )

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        return await self._read(
            "list_communities", read_snapshot(lambda raw: reads.list_communities(raw, self._communities, kb, level))
        )

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        if not entity_ids:
            return []
        return await self._read(
            "communities_of",
            read_snapshot(lambda raw: reads.communities_of(raw, self._communities, kb, entity_ids)),
        )

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        query, limit = unit_query(embedding), capped(limit)
        if query is None or limit == 0:
            return []
        return await self._read(
            "search_communities",
            read_snapshot(
                lambda raw: reads.search_communities(raw, self._vectors, self._communities, kb, query, level, limit)
            ),
        )

    # -- searches ---------------------------------------------------------------------------------------------

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        """BM25-ranked chunks containing any content term of `query`; score = -bm25 (higher is better)."""
        expression, limit = reads.fulltext_match_expression(query), capped(limit)
        if expression is None or limit == 0:
            return []
        return await self._read(
            "search_chunks_fulltext", lambda raw: reads.search_chunks_fulltext(raw, kb, expression, limit)
        )

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        query, limit = unit_query(embedding), capped(limit)
        if query is None or limit == 0:
            return []
        return await self._read(
            "search_chunks_vector",
            read_snapshot(lambda raw: reads.search_chunks_vector(raw, self._vectors, kb, query, limit)),
        )

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        expression, limit = reads.fulltext_match_expression(query), capped(limit)
        if expression is None or limit == 0:
            return []
        return await self._read(
            "search_entities_fulltext", lambda raw: reads.search_entities_fulltext(raw, kb, expression, limit)
        )

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]:
        query, limit = unit_query(embedding), capped(limit)
        if query is None or limit == 0:
            return []
        return await self._read(
            "search_entities_vector",
            read_snapshot(lambda raw: reads.search_entities_vector(raw, self._vectors, kb, query, limit)),
        )

    # -- the graph around entities and chunks --------------------------------------------------------------------

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        if not entity_ids:
            return []
        return await self._read("get_entities", lambda raw: reads.get_entities(raw, kb, entity_ids))

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        if not chunk_ids:
            return {}
        return await self._read("chunk_embeddings", lambda raw: reads.chunk_embeddings(raw, kb, chunk_ids))

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        if not chunk_ids:
            return []
        return await self._read("get_chunks", lambda raw: reads.get_chunks(raw, kb, chunk_ids))

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        limit = capped(limit)
        if not entity_ids or limit == 0:
            return []
        return await self._read("relations_of", lambda raw: reads.relations_of(raw, kb, entity_ids, limit))

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        limit = capped(limit)
        if not entity_ids or limit == 0:
            return []
        return await self._read("chunks_mentioning", lambda raw: reads.chunks_mentioning(raw, kb, entity_ids, limit))

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        if not chunk_ids:
            return {}
        return await self._read("entities_in_chunks", lambda raw: reads.entities_in_chunks(raw, kb, chunk_ids))

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        per_entity_limit = capped(per_entity_limit)
        if not entity_ids or per_entity_limit == 0:
            return {}
        return await self._read(
            "chunks_of_entities", lambda raw: reads.chunks_of_entities(raw, kb, entity_ids, per_entity_limit)
        )

    # -- plumbing -----------------------------------------------------------------------------------------------

    async def _read(self, what: str, work: Callable[[sqlite3.Connection], T]) -> T:
        async with self._reader() as connection:
            return await self._guarded(what, connection, work)

    async def _write(
        self, what: str, work: Callable[[sqlite3.Connection], T], kb: str = "", kinds: tuple[str, ...] = ()
    ) -> T:
        """Run `work` in one write transaction; `kinds` are the vector matrices of `kb` it changes (any of them
        also changes its communities: their members are entities)."""
        self._check_open()
        async with self._write_lock:
            self._check_open()
            try:
                return await self._guarded(what, self._writer, lambda raw: in_transaction(raw, work))
            finally:
                self._vectors.drop(kb, kinds)
                if kinds:
                    self._communities.drop(kb)

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[CancellableConnection]:
        self._check_open()
        connection = await self._readers.get()
        if self._closed:  # close() began while this call waited: hand the connection to it
            self._readers.put_nowait(connection)
            self._check_open()
        try:
            yield connection
        finally:
            self._readers.put_nowait(connection)

    async def _guarded(
        self, what: str, connection: CancellableConnection, work: Callable[[sqlite3.Connection], T]
    ) -> T:
        try:
            return await connection.run(work)
        except sqlite3.Error as exc:
            raise KnowledgeStoreUnavailable(f"graph store {self._path}: {what} failed: {exc}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise KnowledgeStoreUnavailable(f"graph store {self._path} is closed")
