"""Putting documents into a knowledge base."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.domain.knowledge_base import KnowledgeBase


@dataclass(frozen=True, slots=True)
class SourceDocument:
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IndexReport:
    documents_added: int = 0
    documents_unchanged: int = 0
    chunks_written: int = 0
    doc_ids: tuple[str, ...] = ()


# Called after each document with (documents done, documents total, title).
ProgressCallback = Callable[[int, int, str], None]


class DocumentLoader(Protocol):
    def supports(self, path: Path) -> bool: ...

    def files(self, paths: Sequence[Path]) -> list[Path]:
        """The supported files among `paths`, directories walked, in a deterministic order."""
        ...

    def load(self, path: Path) -> list[SourceDocument]: ...


class KnowledgeIndexer(Protocol):
    async def index(
        self, kb: KnowledgeBase, documents: Sequence[SourceDocument], progress: ProgressCallback | None = None
    ) -> IndexReport:
        """Chunk, embed and store; unchanged documents (same content hash) are skipped."""
        ...
