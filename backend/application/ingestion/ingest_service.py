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
from backend.domain.errors import InvalidRequest, UnknownKnowledgeBase


class IngestionService:
    def __init__(self, catalog: KnowledgeBaseCatalog, loader: DocumentLoader, indexer: KnowledgeIndexer) -> None:
        self._catalog = catalog
        self._loader = loader
        self._indexer = indexer

    def load_files(self, paths: Sequence[Path]) -> list[SourceDocument]:
        """Every supported file under `paths` (directories are walked in sorted order)."""
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if p.is_file() and self._loader.supports(p)))
            elif path.is_file() and self._loader.supports(path):
                files.append(path)
            elif not path.exists():
                raise InvalidRequest(f"no such file or directory: {path}")
        return [document for file in files for document in self._loader.load(file)]

    async def ingest(
        self, kb_prefix: str, documents: Sequence[SourceDocument], progress: ProgressCallback | None = None
    ) -> IndexReport:
        kb = self._catalog.get(kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        return await self._indexer.index(kb, documents, progress)
