"""Knowledge bases and their documents: create a KB, ingest, list, get and delete documents."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from backend.application.ports.ingestion import (
    DocumentLoader,
    IndexReport,
    KnowledgeIndexer,
    ProgressCallback,
    SourceDocument,
)
from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.domain.errors import InvalidRequest, NotFound, UnknownKnowledgeBase
from backend.domain.graph import DocumentRecord, StoredDocument
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.text import check_text, field_name, problem_in


class KnowledgeService:
    def __init__(self, catalog: KnowledgeBaseCatalog, loader: DocumentLoader, indexer: KnowledgeIndexer) -> None:
        self._catalog = catalog
        self._loader = loader
        self._indexer = indexer

    async def knowledge_base(self, kb_prefix: str) -> KnowledgeBase:
        kb = await self._catalog.get(kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        return kb

    async def create_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        for part, value in (("description", kb.description), ("keywords", kb.keywords), ("language", kb.language)):
            check_text(value, part)
        return await self._catalog.create(kb)

    async def list_kbs(self) -> Sequence[KnowledgeBase]:
        return await self._catalog.list()

    def load_files(self, paths: Sequence[Path]) -> list[SourceDocument]:
        """Every document in the supported files under `paths`, each keyed by its file's path relative to the
        folder given (a file given itself: its name)."""
        return [document for file in self._loader.files(paths) for document in self._loader.load(file)]

    def load_upload(self, name: str, data: bytes) -> list[SourceDocument]:
        check_text(name, "an uploaded file's name")
        return self._loader.load_bytes(name, data)

    async def check_ingestible(self, kb_prefix: str, documents: Sequence[SourceDocument]) -> KnowledgeBase:
        """The KB, once every document can be stored whole: bad input raises before anything is written."""
        kb = await self.knowledge_base(kb_prefix)
        for position, document in enumerate(documents):
            _check_document(position, document)
        return kb

    async def ingest(
        self,
        kb_prefix: str,
        documents: Sequence[SourceDocument],
        progress: ProgressCallback | None = None,
        refresh: bool = True,
    ) -> IndexReport:
        kb = await self.check_ingestible(kb_prefix, documents)
        return await self._indexer.index(kb, documents, progress, refresh)

    async def refresh_communities(self, kb_prefix: str) -> None:
        await self._indexer.refresh_communities(await self.knowledge_base(kb_prefix))

    async def list_documents(self, kb_prefix: str) -> list[DocumentRecord]:
        return await self._indexer.list_documents(await self.knowledge_base(kb_prefix))

    async def read_document(self, kb_prefix: str, doc_id: str) -> StoredDocument:
        """The document's record and its chunks in order (its text is theirs, joined)."""
        kb = await self.knowledge_base(kb_prefix)
        document = await self._indexer.get_document(kb, doc_id)
        chunks = await self._indexer.document_chunks(kb, doc_id) if document is not None else []
        if document is None or (document.chunk_count and not chunks):  # none, or deleted between the two reads
            raise NotFound(f"no document {doc_id[:80]!r} in knowledge base {kb_prefix!r}")
        return StoredDocument(document, tuple(chunks))

    async def delete_document(self, kb_prefix: str, doc_id: str) -> None:
        if not await self._indexer.delete_document(await self.knowledge_base(kb_prefix), doc_id):
            raise NotFound(f"no document {doc_id[:80]!r} in knowledge base {kb_prefix!r}")


def _check_document(position: int, document: SourceDocument) -> None:
    """Nothing of a batch is written unless every document in it can be stored whole."""
    unnamed = not document.source or problem_in(document.source) is not None
    name = f"documents[{position}]" if unnamed else field_name(document.source)
    for part, value in (
        ("source", document.source),
        ("title", document.title),
        ("text", document.text),
        ("metadata", document.metadata),
    ):
        check_text(value, f"{name}: {part}")
    if not document.text.strip():
        raise InvalidRequest(f"document {document.title[:80]!r} has no text")
