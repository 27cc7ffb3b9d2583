"""Request and response bodies of the knowledge-base endpoints."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from backend.application.knowledge.retrieval_service import MAX_QUERY_CHARS, MAX_TOP_K
from backend.application.ports.ingestion import SourceDocument
from backend.application.ports.retrieval import RetrievalOutcome
from backend.domain.agent_types import DEFAULT_AGENT_TYPE
from backend.domain.graph import DocumentRecord, StoredDocument
from backend.domain.jobs import DocumentStatus, IngestionJob, JobDocument
from backend.domain.knowledge_base import KB_PREFIX_PATTERN, KnowledgeBase
from backend.server.models.requests import AgentTypeName

# Per HTTP request (a JSON body or the records of uploaded files); the CLI ingests any number.
MAX_DOCUMENTS_PER_REQUEST = 1000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateKnowledgeBase(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kb_prefix": "cider_press",
                    "description": "Wrenfield Orchard's cider press: pressing, fermenting and bottling",
                    "keywords": ["cider", "press", "fermentation"],
                    "language": "en",
                    "default_agent": "hybrid_agent",
                }
            ]
        }
    )

    kb_prefix: str = Field(pattern=KB_PREFIX_PATTERN.pattern)
    description: str = Field("", max_length=2000)
    keywords: list[str] = Field(default_factory=list, max_length=100)
    language: str = Field("en", max_length=16)
    default_agent: AgentTypeName = DEFAULT_AGENT_TYPE

    def to_domain(self) -> KnowledgeBase:
        return KnowledgeBase(
            kb_prefix=self.kb_prefix,
            description=self.description,
            keywords=tuple(keyword.strip()[:64] for keyword in self.keywords if keyword.strip()),
            language=self.language,
            default_agent=self.default_agent,
        )


class KnowledgeBaseOut(BaseModel):
    kb_prefix: str
    description: str
    keywords: list[str]
    language: str
    default_agent: str

    @classmethod
    def of(cls, kb: KnowledgeBase) -> KnowledgeBaseOut:
        return cls(
            kb_prefix=kb.kb_prefix,
            description=kb.description,
            keywords=list(kb.keywords),
            language=kb.language,
            default_agent=kb.default_agent,
        )


class KnowledgeBasesResponse(BaseModel):
    knowledge_bases: list[KnowledgeBaseOut]
    agent_types: list[str]
    generation_mode: str


class DocumentIn(_Body):
    title: str = Field(min_length=1, max_length=500)
    text: str = Field(min_length=1, max_length=5_000_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = Field("", max_length=500, description="your id for it: new content under a known source replaces it")

    def to_source(self) -> SourceDocument:
        return SourceDocument(title=self.title, text=self.text, metadata=self.metadata, source=self.source)


class IngestRequest(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "documents": [
                        {
                            "title": "Harvest calendar",
                            "text": "Wrenfield Orchard picks its Bramley apples in late September and presses "
                            "them for cider in October.",
                            "metadata": {"season": "autumn"},
                            "source": "notes/harvest-calendar.md",
                        }
                    ]
                }
            ]
        }
    )

    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS_PER_REQUEST)


class IngestResponse(BaseModel):
    """`?wait=true`: the job once it is over, as the ingestion report it makes."""

    kb_prefix: str
    job_id: str
    status: str  # done, failed (see `error`) or cancelled
    error: str | None
    documents_added: int
    documents_unchanged: int
    documents_replaced: int
    documents_failed: int
    chunks_written: int
    entity_mentions: int
    relation_mentions: int
    model_calls: int
    extraction_fallbacks: int
    doc_ids: list[str]  # of the documents indexed, in the order sent

    @classmethod
    def of(cls, job: IngestionJob, documents: Sequence[JobDocument]) -> IngestResponse:
        return cls(
            kb_prefix=job.kb_prefix,
            job_id=job.job_id,
            status=job.status.value,
            error=job.error,
            **job.counts.as_dict(),
            doc_ids=[document.doc_id for document in documents if document.status is DocumentStatus.DONE],
        )


class DocumentOut(BaseModel):
    doc_id: str
    title: str
    source: str
    chunk_count: int
    metadata: dict[str, Any]
    created_at: datetime | None

    @classmethod
    def of(cls, document: DocumentRecord) -> DocumentOut:
        return cls.model_validate(document, from_attributes=True)


class ChunkOut(BaseModel):
    chunk_id: str
    ordinal: int = Field(description="the chunk's place in the document, from 0")
    text: str
    start: int = Field(description="where the chunk starts in the document's `text`")
    end: int


class DocumentWithText(DocumentOut):
    text: str = Field(description="the document's text: its chunks joined, each overlap once")
    chunks: list[ChunkOut] | None = Field(None, description="the chunks in order, with ?chunks=true")

    @classmethod
    def read(cls, document: StoredDocument, with_chunks: bool) -> DocumentWithText:
        chunks = [ChunkOut.model_validate(c, from_attributes=True) for c in document.chunks] if with_chunks else None
        return cls(**DocumentOut.of(document.record).model_dump(), text=document.text, chunks=chunks)


class DocumentsResponse(BaseModel):
    kb_prefix: str
    documents: list[DocumentOut]


class RetrieveRequest(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"query": "cider pressing season", "agent_type": "naive_rag_agent", "top_k": 5}]
        }
    )

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    agent_type: AgentTypeName | None = None
    top_k: int = Field(8, ge=1, le=MAX_TOP_K)


class RetrieveResponse(BaseModel):
    kb_prefix: str
    agent_type: str
    worker_name: str
    duration_ms: float
    retrieval_results: list[dict[str, Any]]
    reference: dict[str, Any]

    @classmethod
    def of(cls, kb_prefix: str, outcome: RetrievalOutcome) -> RetrieveResponse:
        return cls(
            kb_prefix=kb_prefix,
            agent_type=outcome.agent_type,
            worker_name=outcome.worker_name,
            duration_ms=outcome.duration_ms,
            retrieval_results=[result.to_dict() for result in outcome.results],
            reference=outcome.reference,
        )
