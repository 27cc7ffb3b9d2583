"""Ingestion jobs: their durable records (with the documents they hold) and how their batches reach workers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from backend.application.ports.ingestion import SourceDocument
from backend.domain.jobs import BatchRef, DocumentResult, IngestionJob, JobCounts, JobDocument


@dataclass(frozen=True, slots=True)
class QueuedDocument:
    position: int  # in the job, from 0
    document: SourceDocument


@dataclass(frozen=True, slots=True)
class StartedBatch:
    job: IngestionJob
    documents: tuple[QueuedDocument, ...]  # the batch's documents still pending, in position order


class JobStore(Protocol):
    """Every operation is one transaction; a job's records are consistent whenever they are read."""

    async def create(
        self, kb_prefix: str, created_by: str, documents: Sequence[SourceDocument], batch_size: int
    ) -> IngestionJob:
        """The job, `queued`, with its documents cut into batches of `batch_size`."""
        ...

    async def get(self, job_id: str) -> IngestionJob | None: ...

    async def list_jobs(self, kb_prefix: str, limit: int) -> list[IngestionJob]:
        """The KB's jobs, newest first."""
        ...

    async def documents(self, job_id: str, offset: int, limit: int) -> list[JobDocument]:
        """The job's documents in position order, from `offset`."""
        ...

    async def cancel(self, job_id: str) -> IngestionJob | None:
        """A queued or running job becomes `cancelled` (a batch being indexed finishes, no other starts); a
        finished one stays as it is. None when there is no such job."""
        ...

    async def start_batch(self, ref: BatchRef, worker: str, stale_after_s: float) -> StartedBatch | None:
        """The batch, held by `worker` from now, with its pending documents; the job `running`. None when there is
        nothing for `worker` to do: the job or the batch is over, or another worker holds the batch and sent a
        heartbeat within `stale_after_s`. A batch delivered twice is so run once at a time, and a batch whose
        worker died is run again, skipping what was recorded."""
        ...

    async def heartbeat(self, worker: str) -> None:
        """The batches `worker` holds are still being worked on."""
        ...

    async def release(self, ref: BatchRef) -> None:
        """Hand a held batch back (its worker stops): the next worker takes it at once."""
        ...

    async def record(self, ref: BatchRef, results: Sequence[DocumentResult], counts: JobCounts) -> None:
        """What became of some of the batch's documents, and what they add to the job's counts."""
        ...

    async def finish_batch(self, ref: BatchRef) -> IngestionJob:
        """The batch is over; the job is `done` once every batch is (unless it was cancelled or failed)."""
        ...

    async def fail(self, job_id: str, error: str) -> None:
        """The job cannot go on (its KB is gone, its store refuses every document): `failed`, with why."""
        ...

    async def unfinished_batches(self) -> list[BatchRef]:
        """The batches of queued and running jobs not over yet, oldest job first."""
        ...


class JobDispatcher(Protocol):
    """Gets a job's batches to the workers."""

    async def dispatch(self, batches: Sequence[BatchRef]) -> None:
        """Dispatching a batch that is queued already, or over, does nothing: a worker runs a batch once at a
        time, and a batch it runs again skips what was done."""
        ...
