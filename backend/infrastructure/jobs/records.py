"""Rows of the job tables as the domain's records: the same columns in both job stores (SQLite and Postgres), read
by name; only how a time and a metadata object are stored differs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields
from datetime import datetime
from typing import Any

from backend.application.ports.ingestion import SourceDocument
from backend.application.ports.jobs import QueuedDocument
from backend.domain.jobs import DocumentStatus, IngestionJob, JobCounts, JobDocument, JobStatus

FAILURES_SHOWN = 20  # failed documents a job's record lists (all of them: `documents`)
COUNTS = tuple(f.name for f in fields(JobCounts))
JOB_COLUMNS = (
    "id, kb_prefix, status, created_by, created_at, updated_at, started_at, finished_at, total, processed, batches, "
    + ", ".join(COUNTS)
    + ", error"
)
DOCUMENT_COLUMNS = "position, title, source, status, doc_id, error"
QUEUED_COLUMNS = "position, title, source, text, metadata"

Time = Callable[[Any], datetime]


def job(row: Any, failed: Iterable[Any], time: Time) -> IngestionJob:
    """A row of `JOB_COLUMNS`, with the rows (`DOCUMENT_COLUMNS`) of its first failed documents."""
    return IngestionJob(
        job_id=str(row["id"]),
        kb_prefix=row["kb_prefix"],
        status=JobStatus(row["status"]),
        created_by=row["created_by"],
        created_at=time(row["created_at"]),
        updated_at=time(row["updated_at"]),
        total=row["total"],
        processed=row["processed"],
        batches=row["batches"],
        counts=JobCounts(*(row[name] for name in COUNTS)),
        failures=tuple(document(item) for item in failed),
        error=row["error"],
        started_at=None if row["started_at"] is None else time(row["started_at"]),
        finished_at=None if row["finished_at"] is None else time(row["finished_at"]),
    )


def document(row: Any) -> JobDocument:
    """A row of `DOCUMENT_COLUMNS`."""
    return JobDocument(
        row["position"], row["title"], row["source"], DocumentStatus(row["status"]), row["doc_id"], row["error"]
    )


def queued(row: Any, metadata: dict[str, Any]) -> QueuedDocument:
    """A row of `QUEUED_COLUMNS`, its metadata read."""
    return QueuedDocument(row["position"], SourceDocument(row["title"], row["text"], metadata, row["source"]))
