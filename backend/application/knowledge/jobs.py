"""Ingestion as durable jobs: submitted by a request or the CLI, run batch by batch by workers, followed by anyone
who may read the KB.

`IngestionJobs` is what callers use: `submit` checks the whole request first (nothing is stored for bad input),
stores the job with its documents and dispatches its batches; `get`, `list_jobs`, `cancel` and `wait` follow it.
`JobRunner.run` is what a worker does with a batch it takes: index the batch's pending documents and record how
each ended. A batch run again (its worker died in it) skips the documents recorded as done, and indexing a
document that is stored already changes nothing (documents are keyed by content), so a batch delivered twice
does no harm. A batch whose documents fail together is indexed again one document at a time, so one bad
document does not take the others with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.ports.ingestion import IndexReport, SourceDocument
from backend.application.ports.jobs import JobDispatcher, JobStore, QueuedDocument, StartedBatch
from backend.domain.errors import (
    GraphRagError,
    InvalidRequest,
    KnowledgeStoreUnavailable,
    NotFound,
    StoreUnavailable,
    UnknownKnowledgeBase,
)
from backend.domain.jobs import (
    BatchRef,
    DocumentResult,
    DocumentStatus,
    IngestionJob,
    JobCounts,
    JobDocument,
)

logger = logging.getLogger(__name__)


class IngestionJobs:
    def __init__(
        self,
        knowledge: KnowledgeService,
        store: JobStore,
        dispatcher: JobDispatcher,
        batch_size: int,  # documents a worker indexes in one go: the unit of progress, cancelling and sharing
        poll_s: float = 0.2,
    ) -> None:
        self._knowledge = knowledge
        self._store = store
        self._dispatcher = dispatcher
        self._batch_size = batch_size
        self._poll_s = poll_s

    async def submit(self, kb_prefix: str, created_by: str, documents: Sequence[SourceDocument]) -> IngestionJob:
        await self._knowledge.check_ingestible(kb_prefix, documents)
        if not documents:
            raise InvalidRequest("no document with text was found")
        job = await self._store.create(kb_prefix, created_by, documents, self._batch_size)
        try:
            await self._dispatcher.dispatch([BatchRef(job.job_id, batch) for batch in range(job.batches)])
        except StoreUnavailable as error:  # the job is stored: the workers' upkeep queues it (or claims it) later
            logger.warning("job %s is stored but not queued yet: %s", job.job_id, error.message)
        logger.info("job %s: %d documents for kb=%s in %d batches", job.job_id, job.total, kb_prefix, job.batches)
        return job

    async def get(self, job_id: str) -> IngestionJob:
        job = await self._store.get(job_id)
        if job is None:
            raise NotFound(f"no ingestion job {job_id[:80]!r}")
        return job

    async def documents(self, job_id: str, offset: int = 0, limit: int | None = None) -> list[JobDocument]:
        """The job's documents in the order sent, from `offset` (all of them without `limit`)."""
        job = await self.get(job_id)
        return await self._store.documents(job_id, offset, job.total if limit is None else limit)

    async def list_jobs(self, kb_prefix: str, limit: int = 50) -> list[IngestionJob]:
        await self._knowledge.knowledge_base(kb_prefix)
        return await self._store.list_jobs(kb_prefix, limit)

    async def cancel(self, job_id: str) -> IngestionJob:
        job = await self._store.cancel(job_id)
        if job is None:
            raise NotFound(f"no ingestion job {job_id[:80]!r}")
        return job

    async def wait(self, job_id: str) -> IngestionJob:
        """The job once it is finished (done, failed or cancelled)."""
        job = await self.get(job_id)
        while not job.status.finished:
            await asyncio.sleep(self._poll_s)  # a worker, maybe in another process, runs it: its record tells
            job = await self.get(job_id)
        return job


class JobRunner:
    """Runs the batches a worker takes. While it runs one, it sends the worker's heartbeat every third of
    `stale_after_s`: a batch whose worker stops sending it is run again by the next worker that gets it."""

    def __init__(self, knowledge: KnowledgeService, store: JobStore, stale_after_s: float) -> None:
        self._knowledge = knowledge
        self._store = store
        self._stale_after_s = stale_after_s

    async def run(self, ref: BatchRef, worker: str) -> IngestionJob | None:
        """Index the batch's pending documents; None when there was nothing to do for `worker`."""
        started = await self._store.start_batch(ref, worker, self._stale_after_s)
        if started is None:
            return None
        beating = asyncio.create_task(self._beat(worker))
        try:
            return await self._run(ref, started)
        except BaseException:
            await asyncio.shield(self._store.release(ref))  # stopped or failed: the next worker takes it at once
            raise
        finally:
            beating.cancel()

    async def _beat(self, worker: str) -> None:
        while True:
            await asyncio.sleep(self._stale_after_s / 3)
            try:
                await self._store.heartbeat(worker)
            except Exception:
                logger.warning("worker %s could not send its heartbeat", worker, exc_info=True)

    async def _run(self, ref: BatchRef, started: StartedBatch) -> IngestionJob | None:
        kb_prefix = started.job.kb_prefix
        if started.documents:
            try:
                results, counts = await self._index(kb_prefix, started.documents)
            except (UnknownKnowledgeBase, KnowledgeStoreUnavailable) as error:
                logger.warning("job %s failed: %s", ref.job_id, error.message)
                await self._store.fail(ref.job_id, error.public_message)
                return await self._store.get(ref.job_id)
            await self._store.record(ref, results, counts)
        job = await self._store.finish_batch(ref)
        if job.status.finished and (job.counts.documents_added or job.counts.documents_replaced):
            # Once per job that changed the graph (and once more per batch still running when it was cancelled):
            # communities are built over the whole graph, so a refresh per batch would cost a job many times over.
            await self._knowledge.refresh_communities(kb_prefix)
            logger.info("job %s %s: %s", job.job_id, job.status.value, job.counts.as_dict())
        return job

    async def _index(self, kb_prefix: str, queued: Sequence[QueuedDocument]) -> tuple[list[DocumentResult], JobCounts]:
        try:
            report = await self._knowledge.ingest(kb_prefix, [item.document for item in queued], refresh=False)
        except (UnknownKnowledgeBase, KnowledgeStoreUnavailable):
            raise  # the job cannot go on
        except Exception as error:
            if len(queued) > 1:  # find the document that fails: the others are indexed
                return await self._one_by_one(kb_prefix, queued)
            reason = error.public_message if isinstance(error, GraphRagError) else "indexing failed"
            logger.warning("document %r failed: %s", queued[0].document.title[:80], error, exc_info=True)
            return [DocumentResult(queued[0].position, DocumentStatus.FAILED, error=reason)], JobCounts(
                documents_failed=1
            )
        results = [
            DocumentResult(item.position, DocumentStatus.DONE, doc_id)
            for item, doc_id in zip(queued, report.doc_ids, strict=True)
        ]
        return results, counts_of(report)

    async def _one_by_one(
        self, kb_prefix: str, queued: Sequence[QueuedDocument]
    ) -> tuple[list[DocumentResult], JobCounts]:
        results: list[DocumentResult] = []
        counts = JobCounts()
        for item in queued:
            result, count = await self._index(kb_prefix, [item])
            results += result
            counts += count
        return results, counts


def counts_of(report: IndexReport) -> JobCounts:
    return JobCounts(
        documents_added=report.documents_added,
        documents_unchanged=report.documents_unchanged,
        documents_replaced=report.documents_replaced,
        chunks_written=report.chunks_written,
        entity_mentions=report.entity_mentions,
        relation_mentions=report.relation_mentions,
        model_calls=report.model_calls,
        extraction_fallbacks=report.extraction_fallbacks,
    )
