"""The job store on one SQLite file (the embedded default): the jobs, their batches and their documents.

It is also the embedded queue: a worker `claim`s the oldest queued batch (or one whose worker stopped sending
heartbeats) in one write transaction, so two workers never hold the same batch, and a batch whose worker died
is taken again once its heartbeat is stale. A document's text is kept until it is indexed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

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
from backend.infrastructure.persistence.sqlite.database import SqliteDatabase, utc_now

_UNFINISHED = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)

_SCHEMA: tuple[str, ...] = (
    f"""CREATE TABLE IF NOT EXISTS ingestion_jobs (
        id          TEXT PRIMARY KEY,
        kb_prefix   TEXT NOT NULL,
        status      TEXT NOT NULL,
        created_by  TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        started_at  TEXT,
        finished_at TEXT,
        total       INTEGER NOT NULL,
        processed   INTEGER NOT NULL DEFAULT 0,
        batches     INTEGER NOT NULL,
        {", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in records.COUNTS)},
        error       TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS ingestion_jobs_kb_idx ON ingestion_jobs (kb_prefix, created_at)",
    """CREATE TABLE IF NOT EXISTS ingestion_batches (
        job_id       TEXT NOT NULL REFERENCES ingestion_jobs (id) ON DELETE CASCADE,
        batch        INTEGER NOT NULL,
        status       TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done')),
        worker       TEXT,
        heartbeat_at REAL,
        PRIMARY KEY (job_id, batch)
    )""",
    "CREATE INDEX IF NOT EXISTS ingestion_batches_status_idx ON ingestion_batches (status)",
    """CREATE TABLE IF NOT EXISTS ingestion_documents (
        job_id   TEXT NOT NULL REFERENCES ingestion_jobs (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        batch    INTEGER NOT NULL,
        title    TEXT NOT NULL,
        source   TEXT NOT NULL,
        text     TEXT NOT NULL,
        metadata TEXT NOT NULL,
        status   TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
        doc_id   TEXT NOT NULL DEFAULT '',
        error    TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (job_id, position)
    )""",
    "CREATE INDEX IF NOT EXISTS ingestion_documents_batch_idx ON ingestion_documents (job_id, batch, status)",
)
_CLAIM = f"""
    SELECT b.job_id, b.batch FROM ingestion_batches AS b JOIN ingestion_jobs AS j ON j.id = b.job_id
    WHERE j.status IN {_UNFINISHED} AND (b.status = 'queued' OR (b.status = 'running' AND b.heartbeat_at < :stale))
      AND (:job_id IS NULL OR b.job_id = :job_id)
    ORDER BY j.created_at, b.batch LIMIT 1
"""


class SqliteJobStore:
    """Implements `JobStore`. Open with `await SqliteJobStore.open(path)`; `close()` when done."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    @classmethod
    async def open(cls, path: str | Path) -> SqliteJobStore:
        database = await SqliteDatabase.open(path, "SQLite job store", JobStoreUnavailable)
        try:
            async with database.transaction() as db:
                for statement in _SCHEMA:
                    await db.execute(statement)
        except BaseException:
            await database.close()
            raise
        return cls(database)

    async def close(self) -> None:
        await self._database.close()

    async def ping(self) -> None:
        async with self._database.session() as db:
            await db.execute_fetchall("SELECT 1")

    async def create(
        self, kb_prefix: str, created_by: str, documents: Sequence[SourceDocument], batch_size: int
    ) -> IngestionJob:
        job_id, now = str(uuid.uuid4()), utc_now()
        batches = -(-len(documents) // batch_size)
        async with self._database.transaction() as db:
            await db.execute(
                "INSERT INTO ingestion_jobs (id, kb_prefix, status, created_by, created_at, updated_at, total, "
                "batches) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, kb_prefix, created_by, now, now, len(documents), batches),
            )
            await db.executemany(
                "INSERT INTO ingestion_batches (job_id, batch) VALUES (?, ?)",
                [(job_id, batch) for batch in range(batches)],
            )
            await db.executemany(
                "INSERT INTO ingestion_documents (job_id, position, batch, title, source, text, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (job_id, position, position // batch_size, d.title, d.source, d.text, json.dumps(d.metadata))
                    for position, d in enumerate(documents)
                ],
            )
            return await _job(db, job_id)

    async def get(self, job_id: str) -> IngestionJob | None:
        async with self._database.session() as db:
            return await _find_job(db, job_id)

    async def list_jobs(self, kb_prefix: str, limit: int) -> list[IngestionJob]:
        async with self._database.session() as db:
            rows = await db.execute_fetchall(
                f"SELECT {records.JOB_COLUMNS} FROM ingestion_jobs "
                "WHERE kb_prefix = ? ORDER BY created_at DESC LIMIT ?",
                (kb_prefix, limit),
            )
            return [await _with_failures(db, row) for row in rows]

    async def documents(self, job_id: str, offset: int, limit: int) -> list[JobDocument]:
        async with self._database.session() as db:
            rows = await db.execute_fetchall(
                f"SELECT {records.DOCUMENT_COLUMNS} FROM ingestion_documents "
                "WHERE job_id = ? ORDER BY position LIMIT ? OFFSET ?",
                (job_id, limit, offset),
            )
        return [records.document(row) for row in rows]

    async def cancel(self, job_id: str) -> IngestionJob | None:
        async with self._database.transaction() as db:
            now = utc_now()
            await db.execute(
                "UPDATE ingestion_jobs SET status = 'cancelled', error = 'cancelled by request', updated_at = ?, "
                f"finished_at = ? WHERE id = ? AND status IN {_UNFINISHED}",
                (now, now, job_id),
            )
            return await _find_job(db, job_id)

    async def start_batch(self, ref: BatchRef, worker: str, stale_after_s: float) -> StartedBatch | None:
        async with self._database.transaction() as db:
            job = await _find_job(db, ref.job_id)
            if job is None or job.status.finished:
                return None
            now = time.time()
            held = await db.execute(
                "UPDATE ingestion_batches SET status = 'running', worker = ?, heartbeat_at = ? "
                "WHERE job_id = ? AND batch = ? AND status != 'done' "
                "AND (status = 'queued' OR worker = ? OR heartbeat_at < ?)",
                (worker, now, ref.job_id, ref.batch, worker, now - stale_after_s),
            )
            if held.rowcount == 0:
                return None
            stamp = utc_now()
            await db.execute(
                "UPDATE ingestion_jobs SET status = 'running', started_at = COALESCE(started_at, ?), updated_at = ? "
                "WHERE id = ?",
                (stamp, stamp, ref.job_id),
            )
            rows = await db.execute_fetchall(
                f"SELECT {records.QUEUED_COLUMNS} FROM ingestion_documents "
                "WHERE job_id = ? AND batch = ? AND status = 'pending' ORDER BY position",
                (ref.job_id, ref.batch),
            )
            return StartedBatch(
                await _job(db, ref.job_id), tuple(records.queued(row, json.loads(row["metadata"])) for row in rows)
            )

    async def record(self, ref: BatchRef, results: Sequence[DocumentResult], counts: JobCounts) -> None:
        async with self._database.transaction() as db:
            changed = 0
            for result in results:
                # Only a pending document changes, and only then does it count: a result recorded twice
                # (the batch ran again) adds nothing. A document indexed drops its text; a failed one keeps it.
                cursor = await db.execute(
                    "UPDATE ingestion_documents SET status = ?, doc_id = ?, error = ?, "
                    "text = CASE WHEN ? = 'done' THEN '' ELSE text END "
                    "WHERE job_id = ? AND position = ? AND status = 'pending'",
                    (
                        result.status.value,
                        result.doc_id,
                        result.error,
                        result.status.value,
                        ref.job_id,
                        result.position,
                    ),
                )
                changed += cursor.rowcount
            if changed:
                added = ", ".join(f"{name} = {name} + :{name}" for name in records.COUNTS)
                await db.execute(
                    f"UPDATE ingestion_jobs SET {added}, processed = processed + :changed, updated_at = :now "
                    "WHERE id = :job_id",
                    {**counts.as_dict(), "changed": changed, "now": utc_now(), "job_id": ref.job_id},
                )

    async def finish_batch(self, ref: BatchRef) -> IngestionJob:
        async with self._database.transaction() as db:
            await db.execute(
                "UPDATE ingestion_batches SET status = 'done', worker = NULL WHERE job_id = ? AND batch = ?",
                (ref.job_id, ref.batch),
            )
            now = utc_now()
            await db.execute(
                "UPDATE ingestion_jobs SET status = 'done', finished_at = ?, updated_at = ? "
                f"WHERE id = ? AND status IN {_UNFINISHED} AND NOT EXISTS "
                "(SELECT 1 FROM ingestion_batches WHERE job_id = ? AND status != 'done')",
                (now, now, ref.job_id, ref.job_id),
            )
            return await _job(db, ref.job_id)

    async def fail(self, job_id: str, error: str) -> None:
        async with self._database.transaction() as db:
            now = utc_now()
            await db.execute(
                "UPDATE ingestion_jobs SET status = 'failed', error = ?, finished_at = ?, updated_at = ? "
                f"WHERE id = ? AND status IN {_UNFINISHED}",
                (error, now, now, job_id),
            )

    async def unfinished_batches(self) -> list[BatchRef]:
        async with self._database.session() as db:
            rows = await db.execute_fetchall(
                "SELECT b.job_id, b.batch FROM ingestion_batches AS b JOIN ingestion_jobs AS j ON j.id = b.job_id "
                f"WHERE j.status IN {_UNFINISHED} AND b.status != 'done' ORDER BY j.created_at, b.batch"
            )
        return [BatchRef(row["job_id"], row["batch"]) for row in rows]

    # -- the embedded queue ---------------------------------------------------------------------------

    async def claim(self, worker: str, stale_after_s: float, job_id: str | None = None) -> BatchRef | None:
        """The oldest batch no live worker holds (of `job_id` only, when given), now held by `worker`."""
        async with self._database.transaction() as db:
            now = time.time()
            rows = list(await db.execute_fetchall(_CLAIM, {"stale": now - stale_after_s, "job_id": job_id}))
            if not rows:
                return None
            ref = BatchRef(rows[0]["job_id"], rows[0]["batch"])
            await db.execute(
                "UPDATE ingestion_batches SET status = 'running', worker = ?, heartbeat_at = ? "
                "WHERE job_id = ? AND batch = ?",
                (worker, now, ref.job_id, ref.batch),
            )
            return ref

    async def release(self, ref: BatchRef) -> None:
        async with self._database.transaction() as db:
            await db.execute(
                "UPDATE ingestion_batches SET status = 'queued', worker = NULL "
                "WHERE job_id = ? AND batch = ? AND status = 'running'",
                (ref.job_id, ref.batch),
            )

    async def heartbeat(self, worker: str) -> None:
        async with self._database.transaction() as db:
            await db.execute(
                "UPDATE ingestion_batches SET heartbeat_at = ? WHERE worker = ? AND status = 'running'",
                (time.time(), worker),
            )


async def _find_job(db: aiosqlite.Connection, job_id: str) -> IngestionJob | None:
    rows = list(await db.execute_fetchall(f"SELECT {records.JOB_COLUMNS} FROM ingestion_jobs WHERE id = ?", (job_id,)))
    return await _with_failures(db, rows[0]) if rows else None


async def _job(db: aiosqlite.Connection, job_id: str) -> IngestionJob:
    job = await _find_job(db, job_id)
    assert job is not None, "read in the transaction that wrote it"
    return job


async def _with_failures(db: aiosqlite.Connection, row: Any) -> IngestionJob:
    failed = await db.execute_fetchall(
        f"SELECT {records.DOCUMENT_COLUMNS} FROM ingestion_documents "
        "WHERE job_id = ? AND status = 'failed' ORDER BY position LIMIT ?",
        (row["id"], records.FAILURES_SHOWN),
    )
    return records.job(row, failed, datetime.fromisoformat)
