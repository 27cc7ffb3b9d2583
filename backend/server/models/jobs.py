"""Response bodies of ingestion jobs."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from backend.domain.jobs import IngestionJob, JobDocument


class JobDocumentOut(BaseModel):
    position: int
    title: str
    source: str
    status: str  # pending, done, failed
    doc_id: str
    error: str

    @classmethod
    def of(cls, document: JobDocument) -> JobDocumentOut:
        return cls(
            position=document.position,
            title=document.title,
            source=document.source,
            status=document.status.value,
            doc_id=document.doc_id,
            error=document.error,
        )


class JobCountsOut(BaseModel):
    documents_added: int
    documents_unchanged: int
    documents_replaced: int
    documents_failed: int
    chunks_written: int
    entity_mentions: int
    relation_mentions: int
    model_calls: int
    extraction_fallbacks: int


class JobOut(BaseModel):
    job_id: str
    kb_prefix: str
    status: str  # queued, running, done, failed, cancelled
    created_by: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    total: int  # documents
    processed: int  # documents done or failed
    batches: int
    counts: JobCountsOut
    failures: list[JobDocumentOut]  # the first that failed; `?documents=true` lists every document
    error: str | None  # why the job failed or was cancelled
    documents: list[JobDocumentOut] | None = None  # with `?documents=true`: a page of the job's documents

    @classmethod
    def of(cls, job: IngestionJob, documents: list[JobDocument] | None = None) -> JobOut:
        return cls(
            job_id=job.job_id,
            kb_prefix=job.kb_prefix,
            status=job.status.value,
            created_by=job.created_by,
            created_at=job.created_at,
            updated_at=job.updated_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            total=job.total,
            processed=job.processed,
            batches=job.batches,
            counts=JobCountsOut(**job.counts.as_dict()),
            failures=[JobDocumentOut.of(document) for document in job.failures],
            error=job.error,
            documents=None if documents is None else [JobDocumentOut.of(document) for document in documents],
        )


class JobsResponse(BaseModel):
    kb_prefix: str
    jobs: list[JobOut]
