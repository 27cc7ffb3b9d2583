"""The job store on Postgres (asyncpg): the jobs, their batches and their documents, for workers on any number of
machines. The batches reach the workers through procrastinate (procrastinate_queue.py); `start_batch` is where a
worker takes one, so a batch delivered twice is run once at a time."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from backend.application.ports.ingestion import SourceDocument
from backend.application.ports.jobs import StartedBatch
from backend.domain.errors import JobStoreUnavailable
from backend.domain.jobs import (
    BatchRef,
    DocumentResult,
    IngestionJob,
    JobCounts,
    JobDocument,
    JobStatus,
)
from backend.infrastructure.jobs import records
from backend.infrastructure.persistence.postgres.database import SCHEMA_DIR, PostgresDatabase

_SCHEMA_LOCK_KEY = 0x6772_6167_6A6F_6273  # "gragjobs"
_UNFINISHED = "('queued', 'running')"
_SELECT_JOB = f"SELECT {records.JOB_COLUMNS} FROM ingestion_jobs WHERE id = $1"
_SELECT_FAILURES = f"""
    SELECT {records.DOCUMENT_COLUMNS} FROM ingestion_documents
    WHERE job_id = $1 AND status = 'failed' ORDER BY position LIMIT $2
"""
_ADD_COUNTS = (
    "UPDATE ingestion_jobs SET "
    + ", ".join(f"{name} = {name} + ${n}" for n, name in enumerate(records.COUNTS, start=3))
    + ", processed = processed + $2, updated_at = clock_timestamp() WHERE id = $1"
)


class PostgresJobStore:
    """Implements `JobStore`. Open with `await PostgresJobStore.open(dsn)`; `close()` when done."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._database = database

    @classmethod
    async def open(cls, dsn: str, schema_sql_path: str | Path | None = None) -> PostgresJobStore:
        database = await PostgresDatabase.open(
            dsn,
            schema_sql_path or SCHEMA_DIR / "init_ingestion_jobs.sql",
            "job store",
            JobStoreUnavailable,
            _SCHEMA_LOCK_KEY,
            max_size=4,
        )
        return cls(database)

    async def close(self) -> None:
        await self._database.close()

    async def ping(self) -> None:
        async with self._database.connection() as conn:
            await conn.fetchval("SELECT 1")

    async def create(
        self, kb_prefix: str, created_by: str, documents: Sequence[SourceDocument], batch_size: int
    ) -> IngestionJob:
        job_id = uuid.uuid4()
        batches = -(-len(documents) // batch_size)
        async with self._database.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO ingestion_jobs (id, kb_prefix, status, created_by, total, batches) "
                "VALUES ($1, $2, 'queued', $3, $4, $5)",
                job_id,
                kb_prefix,
                created_by,
                len(documents),
                batches,
            )
            await conn.executemany(
                "INSERT INTO ingestion_batches (job_id, batch) VALUES ($1, $2)",
                [(job_id, batch) for batch in range(batches)],
            )
            await conn.executemany(
                "INSERT INTO ingestion_documents (job_id, position, batch, title, source, text, metadata) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [
                    (job_id, position, position // batch_size, d.title, d.source, d.text, d.metadata)
                    for position, d in enumerate(documents)
                ],
            )
            return await _job(conn, job_id)

    async def get(self, job_id: str) -> IngestionJob | None:
        key = _key(job_id)
        if key is None:
            return None
        async with self._database.connection() as conn:
            return await _find_job(conn, key)

    async def list_jobs(self, kb_prefix: str, limit: int) -> list[IngestionJob]:
        async with self._database.connection() as conn:
            rows = await conn.fetch(
                f"SELECT {records.JOB_COLUMNS} FROM ingestion_jobs "
                "WHERE kb_prefix = $1 ORDER BY created_at DESC LIMIT $2",
                kb_prefix,
                limit,
            )
            return [await _with_failures(conn, row) for row in rows]

    async def documents(self, job_id: str, offset: int, limit: int) -> list[JobDocument]:
        key = _key(job_id)
        if key is None:
            return []
        async with self._database.connection() as conn:
            rows = await conn.fetch(
                f"SELECT {records.DOCUMENT_COLUMNS} FROM ingestion_documents "
                "WHERE job_id = $1 ORDER BY position LIMIT $2 OFFSET $3",
                key,
                limit,
                offset,
            )
        return [records.document(row) for row in rows]

    async def cancel(self, job_id: str) -> IngestionJob | None:
        key = _key(job_id)
        if key is None:
            return None
        async with self._database.connection() as conn, conn.transaction():
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'cancelled', error = 'cancelled by request', "
                "updated_at = clock_timestamp(), finished_at = clock_timestamp() "
                f"WHERE id = $1 AND status IN {_UNFINISHED}",
                key,
            )
            return await _find_job(conn, key)

    async def start_batch(self, ref: BatchRef, worker: str, stale_after_s: float) -> StartedBatch | None:
        key = _key(ref.job_id)
        if key is None:
            return None
        async with self._database.connection() as conn, conn.transaction():
            # The job's row first: a cancel either commits before (nothing starts) or waits for this batch.
            status = await conn.fetchval("SELECT status FROM ingestion_jobs WHERE id = $1 FOR UPDATE", key)
            if status is None or JobStatus(status).finished:
                return None
            held = await conn.fetchval(
                "UPDATE ingestion_batches SET status = 'running', worker = $3, heartbeat_at = clock_timestamp() "
                "WHERE job_id = $1 AND batch = $2 AND status != 'done' AND (status = 'queued' OR worker = $3 "
                "OR heartbeat_at < clock_timestamp() - make_interval(secs => $4)) RETURNING batch",
                key,
                ref.batch,
                worker,
                stale_after_s,
            )
            if held is None:
                return None
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'running', started_at = COALESCE(started_at, clock_timestamp()), "
                "updated_at = clock_timestamp() WHERE id = $1",
                key,
            )
            rows = await conn.fetch(
                f"SELECT {records.QUEUED_COLUMNS} FROM ingestion_documents "
                "WHERE job_id = $1 AND batch = $2 AND status = 'pending' ORDER BY position",
                key,
                ref.batch,
            )
            return StartedBatch(
                await _job(conn, key), tuple(records.queued(row, dict(row["metadata"])) for row in rows)
            )

    async def record(self, ref: BatchRef, results: Sequence[DocumentResult], counts: JobCounts) -> None:
        key = uuid.UUID(ref.job_id)
        async with self._database.connection() as conn, conn.transaction():
            changed = 0
            for result in results:
                # Only a pending document changes, and only then does it count (see the SQLite store).
                status = await conn.execute(
                    "UPDATE ingestion_documents SET status = $3, doc_id = $4, error = $5, "
                    "text = CASE WHEN $3 = 'done' THEN '' ELSE text END "
                    "WHERE job_id = $1 AND position = $2 AND status = 'pending'",
                    key,
                    result.position,
                    result.status.value,
                    result.doc_id,
                    result.error,
                )
                changed += int(status.split()[-1])
            if changed:
                await conn.execute(_ADD_COUNTS, key, changed, *(getattr(counts, name) for name in records.COUNTS))

    async def finish_batch(self, ref: BatchRef) -> IngestionJob:
        key = uuid.UUID(ref.job_id)
        async with self._database.connection() as conn, conn.transaction():
            await conn.execute(
                "UPDATE ingestion_batches SET status = 'done', worker = NULL WHERE job_id = $1 AND batch = $2",
                key,
                ref.batch,
            )
            # The job's row is locked first: two workers finishing its last batches see each other's.
            await conn.execute("SELECT 1 FROM ingestion_jobs WHERE id = $1 FOR UPDATE", key)
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'done', finished_at = clock_timestamp(), "
                f"updated_at = clock_timestamp() WHERE id = $1 AND status IN {_UNFINISHED} AND NOT EXISTS "
                "(SELECT 1 FROM ingestion_batches WHERE job_id = $1 AND status != 'done')",
                key,
            )
            return await _job(conn, key)

    async def fail(self, job_id: str, error: str) -> None:
        async with self._database.connection() as conn:
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'failed', error = $2, finished_at = clock_timestamp(), "
                f"updated_at = clock_timestamp() WHERE id = $1 AND status IN {_UNFINISHED}",
                uuid.UUID(job_id),
                error,
            )

    async def unfinished_batches(self) -> list[BatchRef]:
        async with self._database.connection() as conn:
            rows = await conn.fetch(
                "SELECT b.job_id, b.batch FROM ingestion_batches AS b JOIN ingestion_jobs AS j ON j.id = b.job_id "
                f"WHERE j.status IN {_UNFINISHED} AND b.status != 'done' ORDER BY j.created_at, b.batch"
            )
        return [BatchRef(str(row["job_id"]), row["batch"]) for row in rows]

    # -- for the procrastinate queue -----------------------------------------------------------------------

    async def apply_schema(self, sql: str, marker_table: str, lock_key: int) -> None:
        """Apply another schema (the queue library's) unless `marker_table` exists: once, whoever starts first."""
        async with self._database.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key)
            if await conn.fetchval("SELECT to_regclass($1)", marker_table) is None:
                await conn.execute(sql)

    async def mark_dispatched(self, refs: Sequence[BatchRef]) -> None:
        async with self._database.connection() as conn:
            await conn.executemany(
                "UPDATE ingestion_batches SET dispatched = true WHERE job_id = $1 AND batch = $2",
                [(uuid.UUID(ref.job_id), ref.batch) for ref in refs],
            )

    async def undispatched(self, older_than_s: float) -> list[BatchRef]:
        """Batches stored more than `older_than_s` ago and never put in the queue."""
        async with self._database.connection() as conn:
            rows = await conn.fetch(
                "SELECT job_id, batch FROM ingestion_batches WHERE NOT dispatched "
                "AND created_at < clock_timestamp() - make_interval(secs => $1) ORDER BY created_at, batch",
                older_than_s,
            )
        return [BatchRef(str(row["job_id"]), row["batch"]) for row in rows]

    async def release(self, ref: BatchRef) -> None:
        async with self._database.connection() as conn:
            await conn.execute(
                "UPDATE ingestion_batches SET status = 'queued', worker = NULL "
                "WHERE job_id = $1 AND batch = $2 AND status = 'running'",
                uuid.UUID(ref.job_id),
                ref.batch,
            )

    async def heartbeat(self, worker: str) -> None:
        async with self._database.connection() as conn:
            await conn.execute(
                "UPDATE ingestion_batches SET heartbeat_at = clock_timestamp() "
                "WHERE worker = $1 AND status = 'running'",
                worker,
            )


def _key(job_id: str) -> uuid.UUID | None:
    """The job id as stored; None for text that is no job id (no such job)."""
    try:
        return uuid.UUID(job_id)
    except ValueError:
        return None


async def _find_job(conn: Any, key: uuid.UUID) -> IngestionJob | None:
    row = await conn.fetchrow(_SELECT_JOB, key)
    return None if row is None else await _with_failures(conn, row)


async def _job(conn: Any, key: uuid.UUID) -> IngestionJob:
    job = await _find_job(conn, key)
    assert job is not None, "read in the transaction that wrote it"
    return job


async def _with_failures(conn: Any, row: Any) -> IngestionJob:
    failed = await conn.fetch(_SELECT_FAILURES, row["id"], records.FAILURES_SHOWN)
    return records.job(row, failed, _as_is)


def _as_is(value: datetime) -> datetime:
    return value
