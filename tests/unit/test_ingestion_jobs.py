"""Ingestion jobs on the embedded job store: submitted whole or not at all, run batch by batch by workers, each
document recorded once, one bad document failing alone, cancelling and a worker that dies."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from backend.application.knowledge.jobs import IngestionJobs, JobRunner
from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.ports.ingestion import IndexReport, ProgressCallback, SourceDocument
from backend.application.ports.jobs import JobStore
from backend.domain import ids
from backend.domain.errors import (
    InvalidRequest,
    JobStoreUnavailable,
    KnowledgeStoreUnavailable,
    NotFound,
    UnknownKnowledgeBase,
)
from backend.domain.graph import DocumentRecord
from backend.domain.jobs import BatchRef, DocumentStatus, JobStatus
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.text import UnstorableText
from backend.infrastructure.jobs.embedded_worker import EmbeddedWorker
from backend.infrastructure.jobs.postgres_store import PostgresJobStore
from backend.infrastructure.jobs.procrastinate_queue import ProcrastinateQueue, libpq_conninfo
from backend.infrastructure.jobs.sqlite_store import SqliteJobStore
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.knowledge_bases.catalog import static_catalog

BATCH = 3


class ScriptedIndexer:
    """Indexes what it is given, the way GraphIndexer reports it; a document titled "bad" fails, "down" takes
    the store down."""

    def __init__(self) -> None:
        self.indexed: list[str] = []  # titles, in the order indexed
        self.refreshes = 0
        self.stored: set[str] = set()

    async def index(
        self,
        kb: KnowledgeBase,
        documents: Sequence[SourceDocument],
        progress: ProgressCallback | None = None,
        refresh: bool = True,
    ) -> IndexReport:
        assert not refresh, "a job refreshes once, when it is over"
        titles = [document.title for document in documents]
        if "down" in titles:
            raise KnowledgeStoreUnavailable("graph store refused the connection")
        if "bad" in titles:
            raise ValueError("this document cannot be indexed")
        doc_ids = tuple(ids.document_id(d.title, d.text) for d in documents)
        added = sum(doc_id not in self.stored for doc_id in doc_ids)
        self.stored.update(doc_ids)
        self.indexed += titles
        return IndexReport(documents_added=added, documents_unchanged=len(documents) - added, doc_ids=doc_ids)

    async def refresh_communities(self, kb: KnowledgeBase) -> None:
        self.refreshes += 1

    async def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        return False

    async def get_document(self, kb: KnowledgeBase, doc_id: str) -> DocumentRecord | None:
        return None

    async def list_documents(self, kb: KnowledgeBase) -> list[DocumentRecord]:
        return []


class Setup:
    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.indexer = ScriptedIndexer()
        self.knowledge = KnowledgeService(static_catalog([KnowledgeBase("notes")]), FileDocumentLoader(), self.indexer)
        self.runner = JobRunner(self.knowledge, store, stale_after_s=30)
        self.jobs = IngestionJobs(self.knowledge, store, self, BATCH, poll_s=0.01)
        self.dispatched: list[BatchRef] = []

    async def dispatch(self, batches: Sequence[BatchRef]) -> None:
        self.dispatched += batches

    async def run_all(self, worker: str = "w1", stale_after_s: float = 30.0) -> None:
        """What the workers do: every batch left, delivered to `worker` (as a queue does), until none is."""
        runner = JobRunner(self.knowledge, self.store, stale_after_s)
        while batches := await self.store.unfinished_batches():
            ran = [await runner.run(ref, worker) for ref in batches]
            if all(outcome is None for outcome in ran):
                return  # others hold what is left


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def job_store_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where each job store keeps its records: a fresh Postgres database, or a SQLite file."""
    if request.param == "postgres":
        return str(request.getfixturevalue("isolated_postgres_dsn"))
    return str(tmp_path / "jobs.db")


@pytest.fixture
async def setup(job_store_at: str) -> AsyncIterator[Setup]:
    if job_store_at.startswith("postgres"):
        store: JobStore = await PostgresJobStore.open(job_store_at)
    else:
        store = await SqliteJobStore.open(job_store_at)
    try:
        yield Setup(store)
    finally:
        await store.close()


def docs(*titles: str) -> list[SourceDocument]:
    return [
        SourceDocument(title, f"The text of {title}.", {"n": n}, f"files/{title}.txt") for n, title in enumerate(titles)
    ]


async def test_a_job_is_stored_queued_in_batches_and_dispatched(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "d", "e", "f", "g"))
    assert (job.status, job.total, job.processed, job.batches, job.created_by) == (JobStatus.QUEUED, 7, 0, 3, "alice")
    assert setup.dispatched == [BatchRef(job.job_id, batch) for batch in range(3)]
    assert await setup.store.unfinished_batches() == setup.dispatched
    assert [d.status for d in await setup.jobs.documents(job.job_id)] == [DocumentStatus.PENDING] * 7
    assert [j.job_id for j in await setup.jobs.list_jobs("notes")] == [job.job_id]


async def test_a_worker_runs_every_batch_and_the_job_is_done_with_its_counts(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "d", "e"))
    await setup.run_all()

    done = await setup.jobs.get(job.job_id)
    assert (done.status, done.processed, done.counts.documents_added, done.counts.documents_failed) == (
        JobStatus.DONE,
        5,
        5,
        0,
    )
    assert done.started_at is not None and done.finished_at is not None
    assert setup.indexer.indexed == ["a", "b", "c", "d", "e"]
    assert setup.indexer.refreshes == 1  # once, for the job
    documents = await setup.jobs.documents(job.job_id)
    assert [(d.status, d.doc_id) for d in documents] == [
        (DocumentStatus.DONE, ids.document_id(d.title, f"The text of {d.title}.")) for d in documents
    ]
    assert await setup.store.unfinished_batches() == []
    assert (await setup.jobs.wait(job.job_id)).status is JobStatus.DONE


async def test_the_same_documents_again_are_unchanged_and_refresh_nothing(setup: Setup) -> None:
    for _ in range(2):
        job = await setup.jobs.submit("notes", "alice", docs("a", "b"))
        await setup.run_all()
    again = await setup.jobs.get(job.job_id)
    assert (again.counts.documents_added, again.counts.documents_unchanged) == (0, 2)
    assert setup.indexer.refreshes == 1


async def test_a_bad_document_fails_alone_and_the_others_are_indexed(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "bad", "c", "d"))
    await setup.run_all()

    done = await setup.jobs.get(job.job_id)
    assert (done.status, done.processed, done.counts.documents_added, done.counts.documents_failed) == (
        JobStatus.DONE,
        4,
        3,
        1,
    )
    assert [(f.position, f.title, f.source) for f in done.failures] == [(1, "bad", "files/bad.txt")]
    assert done.failures[0].error == "indexing failed"  # the cause is in the log, not in the record
    assert sorted(setup.indexer.indexed) == ["a", "c", "d"]


async def test_a_store_that_refuses_fails_the_job_with_the_reason(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "down", "e"))
    await setup.run_all()

    failed = await setup.jobs.get(job.job_id)
    assert failed.status is JobStatus.FAILED
    assert failed.error == KnowledgeStoreUnavailable.public_text
    assert failed.processed == 3  # the first batch was done before the store went down
    assert await setup.store.unfinished_batches() == []  # nothing is left for a worker


@pytest.mark.parametrize(
    ("kb", "documents", "error"),
    [
        ("nope", docs("a"), UnknownKnowledgeBase),
        ("notes", [SourceDocument("a", "fine"), SourceDocument("b", "NUL \x00 inside")], UnstorableText),
        ("notes", [], InvalidRequest),
    ],
)
async def test_bad_input_stores_no_job(setup: Setup, kb: str, documents: list[SourceDocument], error: type) -> None:
    with pytest.raises(error):
        await setup.jobs.submit(kb, "alice", documents)
    assert await setup.jobs.list_jobs("notes") == []
    assert setup.dispatched == []


async def test_cancelling_stops_the_job_before_its_next_batch(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "d", "e", "f", "g"))
    await setup.runner.run(BatchRef(job.job_id, 0), "w1")
    cancelled = await setup.jobs.cancel(job.job_id)
    assert (cancelled.status, cancelled.error) == (JobStatus.CANCELLED, "cancelled by request")
    await setup.run_all()

    after = await setup.jobs.get(job.job_id)
    assert (after.status, after.processed) == (JobStatus.CANCELLED, BATCH)
    assert setup.indexer.indexed == ["a", "b", "c"]
    assert [d.status for d in await setup.jobs.documents(job.job_id)][BATCH:] == [DocumentStatus.PENDING] * 4
    assert (await setup.jobs.cancel(job.job_id)).status is JobStatus.CANCELLED  # again: as it is
    with pytest.raises(NotFound):
        await setup.jobs.cancel("no-such-job")


async def test_a_batch_run_again_records_each_document_once(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b"))
    ref = BatchRef(job.job_id, 0)
    started = await setup.store.start_batch(ref, "w1", stale_after_s=30)
    assert started is not None and [q.position for q in started.documents] == [0, 1]
    assert await setup.store.start_batch(ref, "w2", stale_after_s=30) is None  # held by a live worker
    # A worker indexed the batch and recorded it, then died before finishing it: the next run finds nothing to do
    # but finishing, and the counts are not added twice.
    await setup.runner.run(ref, "w1")
    await setup.store.release(ref)
    await setup.runner.run(ref, "w2")
    done = await setup.jobs.get(job.job_id)
    assert (done.status, done.processed, done.counts.documents_added) == (JobStatus.DONE, 2, 2)
    assert setup.indexer.indexed == ["a", "b"]


async def test_a_batch_whose_worker_stopped_beating_is_taken_by_another(setup: Setup) -> None:
    job = await setup.jobs.submit("notes", "alice", docs("a", "b"))
    held = await setup.store.start_batch(BatchRef(job.job_id, 0), "dead-worker", stale_after_s=30)
    assert held is not None
    await setup.run_all("other")
    assert (await setup.jobs.get(job.job_id)).status is JobStatus.RUNNING  # held, and the heartbeat is fresh
    await asyncio.sleep(0.05)
    await setup.run_all("other", stale_after_s=0.01)  # now it is stale for this worker
    assert (await setup.jobs.get(job.job_id)).status is JobStatus.DONE


async def test_the_embedded_worker_claims_batches_oldest_first_and_takes_stale_ones(tmp_path: Path) -> None:
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    try:
        setup = Setup(store)
        first = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "d"))
        second = await setup.jobs.submit("notes", "alice", docs("e"))
        assert await store.claim("w1", stale_after_s=30) == BatchRef(first.job_id, 0)
        assert await store.claim("w2", stale_after_s=30, job_id=second.job_id) == BatchRef(second.job_id, 0)
        assert await store.claim("w2", stale_after_s=30) == BatchRef(first.job_id, 1)
        assert await store.claim("w3", stale_after_s=30) is None  # every batch is held
        await asyncio.sleep(0.05)
        assert await store.claim("w3", stale_after_s=0.01) == BatchRef(first.job_id, 0)  # w1 went quiet
        await asyncio.sleep(0.05)  # and so do w2 and w3
        runner = JobRunner(setup.knowledge, store, stale_after_s=0.01)
        await EmbeddedWorker(store, runner.run, poll_s=0.01, stale_after_s=0.01).run(until_idle=True)
        assert [(await setup.jobs.get(j.job_id)).status for j in (first, second)] == [JobStatus.DONE] * 2
    finally:
        await store.close()


async def test_documents_are_kept_until_indexed(tmp_path: Path) -> None:
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    try:
        setup = Setup(store)
        job = await setup.jobs.submit("notes", "alice", docs("a", "bad"))
        await setup.run_all()
        assert await store.start_batch(BatchRef(job.job_id, 0), "w1", stale_after_s=0) is None  # the job is over
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "jobs.db") as db:
        texts = dict(db.execute("SELECT title, text FROM ingestion_documents WHERE job_id = ?", (job.job_id,)))
    assert texts == {"a": "", "bad": "The text of bad."}


@pytest.mark.postgres
async def test_procrastinate_delivers_every_batch_to_one_of_two_workers_once(isolated_postgres_dsn: str) -> None:
    store = await PostgresJobStore.open(isolated_postgres_dsn)
    queues = [ProcrastinateQueue(isolated_postgres_dsn, store, stale_after_s=5) for _ in range(2)]
    try:
        setup = Setup(store)
        setup.jobs = IngestionJobs(setup.knowledge, store, queues[0], BATCH, poll_s=0.01)
        titles = [f"t{n}" for n in range(20)]
        job = await setup.jobs.submit("notes", "alice", docs(*titles))
        runs: dict[str, list[int]] = {"w1": [], "w2": []}

        def runner_for(name: str):  # type: ignore[no-untyped-def]
            async def run(ref: BatchRef, worker: str) -> object:
                runs[name].append(ref.batch)
                await asyncio.sleep(0.02)  # long enough for the other worker to fetch the next batch
                return await setup.runner.run(ref, worker)

            return run

        await asyncio.gather(
            *(queue.work(runner_for(name), until_idle=True) for queue, name in zip(queues, runs, strict=True))
        )

        done = await setup.jobs.get(job.job_id)
        assert (done.status, done.processed, done.counts.documents_added) == (JobStatus.DONE, 20, 20)
        assert sorted(setup.indexer.indexed) == sorted(titles)  # each document indexed once
        assert sorted(runs["w1"] + runs["w2"]) == list(range(7))  # each batch delivered once
        assert runs["w1"] and runs["w2"]  # and both workers took some
        assert await store.undispatched(older_than_s=0) == []
    finally:
        for queue in queues:
            await queue.close()
        await store.close()


@pytest.mark.postgres
async def test_a_batch_stored_but_never_queued_is_queued_by_the_upkeep(isolated_postgres_dsn: str) -> None:
    store = await PostgresJobStore.open(isolated_postgres_dsn)
    queue = ProcrastinateQueue(isolated_postgres_dsn, store, stale_after_s=0.01)
    try:
        setup = Setup(store)  # its dispatcher only records: the process "died" before queueing
        job = await setup.jobs.submit("notes", "alice", docs("a", "b", "c", "d"))
        await asyncio.sleep(0.05)
        assert [ref.batch for ref in await store.undispatched(older_than_s=0.01)] == [0, 1]
        await queue.recover()
        assert await store.undispatched(older_than_s=0) == []
        await queue.work(setup.runner.run, until_idle=True)
        assert (await setup.jobs.get(job.job_id)).status is JobStatus.DONE
    finally:
        await queue.close()
        await store.close()


def test_server_settings_in_the_dsn_reach_libpq_as_options() -> None:
    dsn = "postgresql://u:p@db:5432/app?search_path=test_1&sslmode=require&application_name=x"
    assert libpq_conninfo(dsn) == (
        "postgresql://u:p@db:5432/app?sslmode=require&application_name=x&options=-c%20search_path%3Dtest_1"
    )
    assert libpq_conninfo("postgresql://db/app") == "postgresql://db/app"


async def test_a_job_stored_but_not_queued_is_still_accepted(setup: Setup) -> None:
    class QueueDown:
        async def dispatch(self, batches: Sequence[BatchRef]) -> None:
            raise JobStoreUnavailable("the queue's Postgres refused the connection")

    jobs = IngestionJobs(setup.knowledge, setup.store, QueueDown(), BATCH)
    job = await jobs.submit("notes", "alice", docs("a", "b"))
    assert (await jobs.get(job.job_id)).status is JobStatus.QUEUED  # stored: the upkeep queues it later
    await setup.run_all()
    assert (await jobs.get(job.job_id)).status is JobStatus.DONE
