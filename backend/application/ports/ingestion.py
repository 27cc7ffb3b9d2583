"""Putting documents into a knowledge base, listing and deleting them; the parts indexing is built from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.domain.graph import (
    BuiltCommunities,
    ChunkRecord,
    CommunityRecord,
    DocumentRecord,
    EntityGraph,
    EntityRecord,
    Extraction,
    RelationRecord,
)
from backend.domain.knowledge_base import KnowledgeBase


@dataclass(frozen=True, slots=True)
class SourceDocument:
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    # A stable name for where it came from (a file path, a client's id). Ingesting different
    # content under the same source replaces the old version; "" means no replacement.
    source: str = ""


@dataclass(frozen=True, slots=True)
class IndexReport:
    documents_added: int = 0  # new, under a source the KB did not hold (or none)
    documents_unchanged: int = 0  # stored already (same content hash): skipped
    documents_replaced: int = 0  # new versions of a stored source: each counts here once, and not as added
    chunks_written: int = 0
    entity_mentions: int = 0
    relation_mentions: int = 0
    model_calls: int = 0
    extraction_fallbacks: int = 0  # chunks whose model extraction did not parse, extracted offline instead
    doc_ids: tuple[str, ...] = ()

    def __add__(self, other: IndexReport) -> IndexReport:
        """The counts added up and the doc ids joined: the report of two runs, or of a run and one more document."""
        return IndexReport(*(mine + theirs for mine, theirs in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file to load and the name its documents are stored under (their `source`): its path relative to the
    folder it was found in, or its own name when given itself. Never an absolute path: that would show the
    server's file system, and change when the folder moves (its documents would then be added again)."""

    path: Path
    name: str


# Called after each document with (documents done, documents total, title).
ProgressCallback = Callable[[int, int, str], None]


class DocumentLoader(Protocol):
    def supports(self, path: Path) -> bool: ...

    def files(self, paths: Sequence[Path]) -> list[SourceFile]:
        """The supported files among `paths`, directories walked, in a deterministic order, each named."""
        ...

    def load(self, file: SourceFile) -> list[SourceDocument]:
        """The file's documents, whose `source` is the file's name (a record's adds `#id`)."""
        ...

    def load_bytes(self, name: str, data: bytes) -> list[SourceDocument]:
        """Documents from an uploaded file's name and content."""
        ...


class KnowledgeIndexer(Protocol):
    async def index(
        self,
        kb: KnowledgeBase,
        documents: Sequence[SourceDocument],
        progress: ProgressCallback | None = None,
        refresh: bool = True,
    ) -> IndexReport:
        """Chunk, extract, embed and store; unchanged documents (same content hash) are skipped. The KB's
        communities are refreshed after, unless `refresh` is off (a job refreshes once, when it is over)."""
        ...

    async def refresh_communities(self, kb: KnowledgeBase) -> None: ...

    async def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        """Remove a document and everything only it supported; False if there was none."""
        ...

    async def get_document(self, kb: KnowledgeBase, doc_id: str) -> DocumentRecord | None: ...

    async def document_chunks(self, kb: KnowledgeBase, doc_id: str) -> list[ChunkRecord]:
        """The document's chunks by ordinal; [] for a document the KB does not hold."""
        ...

    async def list_documents(self, kb: KnowledgeBase) -> list[DocumentRecord]: ...


class Chunker(Protocol):
    def chunks(self, kb: str, doc_id: str, text: str) -> list[ChunkRecord]:
        """The document's text cut into overlapping pieces, in order, with their ids and offsets."""
        ...


class Extractor(Protocol):
    async def extract(self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> Extraction:
        """The entities and relations the chunks mention."""
        ...


class CommunityDetector(Protocol):
    async def build(
        self,
        kb: str,
        graph: EntityGraph,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
        previous: Mapping[str, CommunityRecord],
    ) -> BuiltCommunities:
        """Every community of the entity graph, titled and summarized; a community in `previous` (by id, which
        its members determine) keeps its stored record."""
        ...
