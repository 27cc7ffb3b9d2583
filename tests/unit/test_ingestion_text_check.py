"""Ingestion writes nothing unless every document of the batch is text every store can hold."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.ports.ingestion import IndexReport, ProgressCallback, SourceDocument
from backend.domain.graph import ChunkRecord, DocumentRecord
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.text import UnstorableText
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.knowledge_bases.catalog import static_catalog


class RecordingIndexer:
    def __init__(self) -> None:
        self.batches: list[list[SourceDocument]] = []

    async def index(
        self,
        kb: KnowledgeBase,
        documents: Sequence[SourceDocument],
        progress: ProgressCallback | None = None,
        refresh: bool = True,
    ) -> IndexReport:
        self.batches.append(list(documents))
        return IndexReport(documents_added=len(documents))

    async def refresh_communities(self, kb: KnowledgeBase) -> None:
        pass

    async def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        return False

    async def get_document(self, kb: KnowledgeBase, doc_id: str) -> DocumentRecord | None:
        return None

    async def document_chunks(self, kb: KnowledgeBase, doc_id: str) -> list[ChunkRecord]:
        return []

    async def list_documents(self, kb: KnowledgeBase) -> list[DocumentRecord]:
        return []


def service() -> tuple[KnowledgeService, RecordingIndexer]:
    indexer = RecordingIndexer()
    return KnowledgeService(static_catalog([KnowledgeBase("notes")]), FileDocumentLoader(), indexer), indexer


@pytest.mark.parametrize(
    ("name", "data", "refused"),
    [
        ("records.json", b'[{"title": "ok", "text": "fine"}, {"title": "t", "text": "bad \\ud800"}]', "text"),
        ("records.json", b'{"title": "t", "text": "x", "tags": {"k": ["\\u0000"]}}', "metadata.tags.k[0]"),
        ("records.jsonl", b'{"title": "\\udfff", "text": "x"}', "title"),
        ("records.jsonl", b'{"text": "x", "\\ud800": 1}', "a key in records.jsonl#1: metadata"),
        ("records.json", b'{"id": "\\u0000", "text": "x"}', "documents[0]: source contains a NUL"),
    ],
)
async def test_an_uploaded_records_file_with_unstorable_text_is_refused_naming_it(
    name: str, data: bytes, refused: str
) -> None:
    knowledge, indexer = service()
    documents = knowledge.load_upload(name, data)

    with pytest.raises(UnstorableText) as raised:
        await knowledge.ingest("notes", documents)

    assert refused in raised.value.message
    assert indexer.batches == []  # nothing of the batch was written


async def test_documents_from_any_entry_point_are_checked_before_anything_is_written() -> None:
    knowledge, indexer = service()
    documents = [
        SourceDocument(title="fine", text="fine", metadata={}, source=""),
        SourceDocument(title="fine", text="also fine", metadata={"note": "nul \x00"}, source=""),
    ]

    with pytest.raises(UnstorableText, match=r"^documents\[1\]: metadata\.note contains a NUL character"):
        await knowledge.ingest("notes", documents)

    assert indexer.batches == []
    assert (await knowledge.ingest("notes", documents[:1])).documents_added == 1


@pytest.mark.parametrize("name", ["a\x00b.txt", "bad\ud800.txt"])
def test_an_uploaded_file_name_is_text_too(name: str) -> None:
    knowledge, _ = service()

    with pytest.raises(UnstorableText, match=r"^an uploaded file's name contains"):
        knowledge.load_upload(name, b"text")


@pytest.mark.parametrize(
    ("kb", "refused"),
    [
        (KnowledgeBase("fresh", description="from a shell \udcff"), "description"),  # argv's surrogateescape
        (KnowledgeBase("fresh", keywords=("ok", "nul\x00")), r"keywords\[1\]"),
    ],
)
async def test_a_new_knowledge_base_is_text_too(kb: KnowledgeBase, refused: str) -> None:
    knowledge, _ = service()

    with pytest.raises(UnstorableText, match=f"^{refused} contains"):
        await knowledge.create_kb(kb)

    assert [kb.kb_prefix for kb in await knowledge.list_kbs()] == ["notes"]
