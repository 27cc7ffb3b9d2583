"""Ingestion jobs: documents put into a knowledge base off the request, durably, by any number of workers.

A job holds its documents (stored with it when it is created) in batches; a batch is the unit a worker takes.
Each document ends `done` (with the id it was stored under) or `failed` (with the reason); the job's counts add
up what its documents did. A job is `queued` until a worker starts a batch, `running` until every batch is
finished, then `done` (some documents may have failed: see `counts.failed`), `failed` (the job could not go
on: `error` says why) or `cancelled` (its pending documents were not indexed; those done stay).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class DocumentStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class JobCounts:
    """What a job's documents did so far (the fields of the ingestion report, and the failures)."""

    documents_added: int = 0
    documents_unchanged: int = 0
    documents_replaced: int = 0
    documents_failed: int = 0
    chunks_written: int = 0
    entity_mentions: int = 0
    relation_mentions: int = 0
    model_calls: int = 0
    extraction_fallbacks: int = 0

    def __add__(self, other: JobCounts) -> JobCounts:
        return JobCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class JobDocument:
    """A document of a job, as its record shows it."""

    position: int  # in the job, from 0
    title: str
    source: str
    status: DocumentStatus
    doc_id: str = ""  # the id it is stored under, once done
    error: str = ""  # why it failed


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """How one document of a batch ended."""

    position: int
    status: DocumentStatus
    doc_id: str = ""  # the id it is stored under (done)
    error: str = ""  # why not (failed)


@dataclass(frozen=True, slots=True)
class BatchRef:
    job_id: str
    batch: int


@dataclass(frozen=True, slots=True)
class IngestionJob:
    job_id: str
    kb_prefix: str
    status: JobStatus
    created_by: str
    created_at: datetime
    updated_at: datetime
    total: int  # documents
    processed: int  # documents done or failed
    batches: int
    counts: JobCounts = field(default_factory=JobCounts)
    failures: tuple[JobDocument, ...] = ()  # the first few that failed, in position order
    error: str | None = None  # why the job failed or was cancelled
    started_at: datetime | None = None
    finished_at: datetime | None = None
