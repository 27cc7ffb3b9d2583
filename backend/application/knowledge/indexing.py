"""Ingestion into a GraphStore: chunk → extract → embed → write, a batch of documents at a time.

Documents are keyed by content hash, so re-ingesting an unchanged document does no work, and a
changed document under the same `source` replaces its old version. A batch is written in one store
call; communities are refreshed once per `index()`, not per document.

Batches are pipelined: while one batch is written (the store's work: on Neo4j, the server's CPU), the next
one is prepared, extracted and embedded (ours). What the next batch decides from the store is kept right:
a document whose id or source is in the batch being written waits for that write, and the entities that
batch introduces count as existing (they get their vector from it). A write starts only after the one
before it succeeded, so a failure stops the run with nothing after it written.

The writes and the community refresh run inside the store's `bulk_load`, which may suspend search indexes
that cost more to keep up write by write than to build once (Neo4j's vector indexes on a large load).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

import numpy as np

from backend.application.knowledge.communities import CommunityRefresher
from backend.application.knowledge.locks import KbLocks
from backend.application.ports.graph_store import BulkLoad, DocumentWrite, GraphStore
from backend.application.ports.ingestion import (
    Chunker,
    Extractor,
    IndexReport,
    ProgressCallback,
    SourceDocument,
)
from backend.domain import ids
from backend.domain.graph import ChunkRecord, DocumentGraph, DocumentRecord, EntityMention, Extraction
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.ports import TextEmbedder, Vector

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Prepared:
    record: DocumentRecord
    chunks: tuple[ChunkRecord, ...]
    outdated: tuple[str, ...]  # earlier versions from the same source, deleted once this one is written


@dataclass(frozen=True, slots=True)
class _Identified:
    """A source document with its id: the hash of its normalised title and text."""

    document: SourceDocument
    title: str
    text: str
    doc_id: str

    @classmethod
    def of(cls, document: SourceDocument) -> _Identified:
        text = ids.normalise_text(document.text)
        title = document.title.strip() or "untitled"
        return cls(document, title, text, ids.document_id(title, text))


@dataclass(frozen=True, slots=True)
class _Staged:
    """A batch ready to write: what `_stage_batch` produced, for `_write_batch`."""

    doc_ids: tuple[str, ...]  # every document of the batch, written or unchanged, in input order
    sources: frozenset[str]  # the batch's non-empty sources
    writes: tuple[tuple[_Prepared, Extraction], ...]
    documents: tuple[DocumentWrite, ...]
    new_entity_ids: frozenset[str]  # the entities whose vectors this batch brings


@dataclass(slots=True)
class _Writing:
    """A batch being written while the next one is staged."""

    staged: _Staged
    task: asyncio.Task[None]

    def involves(self, doc_id: str, source: str) -> bool:
        return doc_id in self.staged.doc_ids or (bool(source) and source in self.staged.sources)

    async def finished(self) -> None:
        # Shielded: staging may wait for the write, and `index()` owns (and may cancel) the task.
        await asyncio.shield(self.task)


class GraphIndexer:
    """Implements the application's `KnowledgeIndexer` port over a `GraphStore`."""

    def __init__(
        self,
        store: GraphStore,
        embedder: TextEmbedder,
        chunker: Chunker,
        extractor: Extractor,
        communities: CommunityRefresher,
        locks: KbLocks,
        batch_size: int = 64,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._chunker = chunker
        self._extractor = extractor
        self._communities = communities
        self._batch_size = max(1, batch_size)
        # Writers of one KB take turns so that replacements and community refreshes see a stable graph.
        self._lock = locks

    async def index(
        self,
        kb: KnowledgeBase,
        documents: Sequence[SourceDocument],
        progress: ProgressCallback | None = None,
        refresh: bool = True,
    ) -> IndexReport:
        parts: list[IndexReport] = []  # one per document: added, replaced or unchanged
        doc_ids: list[str] = []
        async with self._lock(kb.kb_prefix), AsyncExitStack() as stack:
            load = await self._write_batches(kb.kb_prefix, documents, parts, doc_ids, progress, stack)
            if load is not None:  # something was written (a failed write raised out of `_write_batches`)
                await load.documents_written()
                if refresh:
                    await self._communities.refresh(kb.kb_prefix)
        report = replace(sum(parts, IndexReport()), doc_ids=tuple(doc_ids))
        logger.info(
            "indexed kb=%s: %d added, %d unchanged, %d replaced, %d chunks, %d model calls",
            kb.kb_prefix,
            report.documents_added,
            report.documents_unchanged,
            report.documents_replaced,
            report.chunks_written,
            report.model_calls,
        )
        if report.extraction_fallbacks:
            logger.warning(
                "kb=%s: the model's extraction of %d chunks did not parse; they were extracted offline",
                kb.kb_prefix,
                report.extraction_fallbacks,
            )
        return report

    async def _write_batches(
        self,
        kb: str,
        documents: Sequence[SourceDocument],
        parts: list[IndexReport],
        doc_ids: list[str],
        progress: ProgressCallback | None,
        stack: AsyncExitStack,
    ) -> BulkLoad | None:
        """Stage each batch while the one before it is written. The store's bulk load is entered at the first
        write, in `stack` (a run whose documents are all stored already changes nothing); None if none."""
        load: BulkLoad | None = None
        writing: _Writing | None = None
        try:
            for start in range(0, len(documents), self._batch_size):
                batch = documents[start : start + self._batch_size]
                staged = await self._stage_batch(kb, batch, parts, writing)
                doc_ids.extend(staged.doc_ids)
                if writing is not None:
                    await writing.finished()
                if load is None and staged.documents:
                    load = await stack.enter_async_context(self._store.bulk_load(len(documents) - start))
                task = asyncio.create_task(self._write_batch(kb, staged, parts))
                if progress is not None:
                    task.add_done_callback(_reporter(progress, batch, start, len(documents)))
                writing = _Writing(staged, task)
            if writing is not None:
                await writing.finished()
        except BaseException as error:
            if writing is not None and not writing.task.done():
                # A batch that failed to stage leaves the one before it to finish; only a cancelled
                # `index()` cancels the write under way (the store rolls it back).
                if isinstance(error, asyncio.CancelledError):
                    writing.task.cancel()
                await asyncio.gather(writing.task, return_exceptions=True)
            raise
        return load

    async def _stage_batch(
        self, kb: str, batch: Sequence[SourceDocument], parts: list[IndexReport], writing: _Writing | None
    ) -> _Staged:
        """Prepare every document of the batch and embed them in two calls (while `writing` may still run).

        Small documents (a passage, a chat message) cost little each; what they share is the
        embedder's per-call overhead, which batching across documents pays once.
        """
        identified = [_Identified.of(document) for document in batch]
        doc_ids = [item.doc_id for item in identified]
        if writing is not None and any(writing.involves(item.doc_id, item.document.source) for item in identified):
            await writing.finished()  # what the store says about these documents depends on that write
        stored = await self._store.existing_document_ids(kb, doc_ids)
        prepared: dict[str, _Prepared] = {}
        for item in identified:
            if item.doc_id in stored or item.doc_id in prepared:
                parts.append(IndexReport(documents_unchanged=1))
            else:
                prepared[item.doc_id] = await self._prepare(kb, item)
        extractions = await asyncio.gather(
            *(self._extractor.extract(kb, work.record, work.chunks) for work in prepared.values())
        )
        chunk_vectors = await self._embed(
            [f"{work.record.title}\n{chunk.text}" for work in prepared.values() for chunk in work.chunks]
        )
        # Written or still being written, the batch before brings these entities' vectors.
        in_flight = writing.staged.new_entity_ids if writing is not None else frozenset()
        entity_vectors = await self._new_entity_vectors(kb, extractions, in_flight)
        documents: list[DocumentWrite] = []
        offset = 0
        for work, extraction in zip(prepared.values(), extractions, strict=True):
            record = work.record
            if extraction.fallbacks:  # the document's record says how much of it the model did not extract
                record = replace(record, metadata={**record.metadata, "extraction_fallbacks": extraction.fallbacks})
            graph = DocumentGraph(record, work.chunks, extraction.entity_mentions, extraction.relation_mentions)
            mentioned = {mention.entity_id for mention in extraction.entity_mentions}
            offered = {entity_id: entity_vectors[entity_id] for entity_id in mentioned if entity_id in entity_vectors}
            documents.append(DocumentWrite(graph, chunk_vectors[offset : offset + len(work.chunks)], offered))
            offset += len(work.chunks)
        return _Staged(
            tuple(doc_ids),
            frozenset(item.document.source for item in identified if item.document.source),
            tuple(zip(prepared.values(), extractions, strict=True)),
            tuple(documents),
            frozenset(entity_vectors),
        )

    async def _write_batch(self, kb: str, staged: _Staged, parts: list[IndexReport]) -> None:
        """One store call for the batch, then the older versions its documents replace."""
        await self._store.upsert_documents(kb, staged.documents)
        for work, extraction in staged.writes:
            for old in work.outdated:
                await self._store.delete_document(kb, old)
            parts.append(
                IndexReport(
                    # A new version of a stored source is one document replaced, however many it supersedes.
                    documents_added=0 if work.outdated else 1,
                    documents_replaced=1 if work.outdated else 0,
                    chunks_written=len(work.chunks),
                    entity_mentions=len(extraction.entity_mentions),
                    relation_mentions=len(extraction.relation_mentions),
                    model_calls=extraction.model_calls,
                    extraction_fallbacks=extraction.fallbacks,
                )
            )

    async def _prepare(self, kb: str, item: _Identified) -> _Prepared:
        """What to write for a document the KB does not hold yet, and the older versions it replaces."""
        document = item.document
        outdated = [d.doc_id for d in await self._previous_versions(kb, document.source) if d.doc_id != item.doc_id]
        chunks = self._chunker.chunks(kb, item.doc_id, item.text)
        record = DocumentRecord(item.doc_id, item.title, dict(document.metadata), document.source, len(chunks))
        return _Prepared(record, tuple(chunks), tuple(outdated))

    async def _previous_versions(self, kb: str, source: str) -> list[DocumentRecord]:
        return await self._store.find_documents_by_source(kb, source) if source else []

    async def _embed(self, texts: Sequence[str]) -> list[Vector]:
        """A vector per text; a zero one (stored as "no embedding") for a text in a language the model does not
        cover, e.g. Chinese under the English-only MiniLM: searches never use such vectors, so they are not
        computed (for a Chinese corpus that is most of the indexing time)."""
        if not texts:
            return []
        covered = [i for i, text in enumerate(texts) if self._embedder.covers(text)]
        if len(covered) == len(texts):
            return list(await self._embedder.embed(texts))
        vectors: list[Vector] = [np.zeros(self._embedder.dimension, dtype=np.float32) for _ in texts]
        if covered:
            for i, vector in zip(covered, await self._embedder.embed([texts[i] for i in covered]), strict=True):
                vectors[i] = vector
        return vectors

    async def _new_entity_vectors(
        self, kb: str, extractions: Sequence[Extraction], in_flight: frozenset[str]
    ) -> dict[str, Vector]:
        """Vectors for the entities the KB does not have yet (existing ones keep theirs; `in_flight` ones are
        being written with theirs)."""
        first_mention: dict[str, EntityMention] = {}
        for extraction in extractions:
            for mention in extraction.entity_mentions:
                if mention.entity_id not in in_flight:
                    first_mention.setdefault(mention.entity_id, mention)
        existing = await self._store.existing_entity_ids(kb, list(first_mention))
        new = [mention for entity_id, mention in first_mention.items() if entity_id not in existing]
        vectors = await self._embed([_entity_text(mention) for mention in new])
        return {mention.entity_id: vector for mention, vector in zip(new, vectors, strict=True)}

    async def refresh_communities(self, kb: KnowledgeBase) -> None:
        async with self._lock(kb.kb_prefix):
            await self._communities.refresh(kb.kb_prefix)

    async def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        async with self._lock(kb.kb_prefix):
            deleted = await self._store.delete_document(kb.kb_prefix, doc_id)
            if deleted:
                await self._communities.refresh(kb.kb_prefix)
        return deleted

    async def get_document(self, kb: KnowledgeBase, doc_id: str) -> DocumentRecord | None:
        return await self._store.get_document(kb.kb_prefix, doc_id)

    async def document_chunks(self, kb: KnowledgeBase, doc_id: str) -> list[ChunkRecord]:
        return await self._store.document_chunks(kb.kb_prefix, doc_id)

    async def list_documents(self, kb: KnowledgeBase) -> list[DocumentRecord]:
        return await self._store.list_documents(kb.kb_prefix)


def _reporter(
    progress: ProgressCallback, batch: Sequence[SourceDocument], start: int, total: int
) -> Callable[[asyncio.Task[None]], None]:
    """Reports a batch's documents once its write succeeded."""

    def report(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is None:
            for offset, document in enumerate(batch, start=start + 1):
                progress(offset, total, document.title)

    return report


def _entity_text(mention: EntityMention) -> str:
    """What an entity's vector is computed from: its name alone.

    Names are a few word pieces, so tens of thousands of entities embed in seconds; descriptions
    would cost ten times more for little gain in matching a question's names.
    """
    return mention.name
