"""Putting files into a knowledge base (the minimal ingestion use case)."""

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
from backend.domain.errors import UnknownKnowledgeBase


class IngestionService:
    def __init__(self, catalog: KnowledgeBaseCatalog, loader: DocumentLoader, indexer: KnowledgeIndexer) -> None:
        self._catalog = catalog
        self._loader = loader
        self._indexer = indexer

    def load_files(self, paths: Sequence[Path]) -> list[SourceDocument]:
        """Every document in the supported files under `paths`."""
        return [document for file in self._loader.files(paths) for document in self._loader.load(file)]

    async def ingest(
        self, kb_prefix: str, documents: Sequence[SourceDocument], progress: ProgressCallback | None = None
    ) -> IndexReport:
        kb = self._catalog.get(kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        return await self._indexer.index(kb, documents, progress)
