"""The Postgres queue of ingestion batches: procrastinate (docs/architecture.md, "Jobs", says why this library).

A batch is one procrastinate job of the task `ingestion.index_batch` on the queue `ingestion`, deferred with a
queueing lock per batch, so a batch waits in the queue at most once. Workers on any number of machines fetch them
(`FOR UPDATE SKIP LOCKED`, woken by LISTEN/NOTIFY) and run them through `JobRunner.run`; the job store's
`start_batch` is where a worker takes a batch, so a batch delivered twice runs once at a time.

Two things procrastinate leaves to its users, every worker does every `stale_after_s / 2`:
- a job whose worker died stays `doing`: jobs of workers without a heartbeat for `stale_after_s` are retried;
- a batch stored by a process that died before deferring it is deferred (the job store marks what was deferred).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import procrastinate
import psycopg
import psycopg_pool
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.schema import SchemaManager

from backend.domain.errors import JobStoreUnavailable
from backend.domain.jobs import BatchRef
from backend.infrastructure.jobs.postgres_store import PostgresJobStore

logger = logging.getLogger(__name__)

QUEUE = "ingestion"
TASK = "ingestion.index_batch"
_SCHEMA_LOCK_KEY = 0x6772_6167_7072_6F63  # "gragproc"
CONNECT_TIMEOUT_S = 10.0
# Query parameters libpq takes as connection keywords; asyncpg sends any other as a server setting.
_LIBPQ_KEYWORDS = frozenset(
    {
        "application_name",
        "channel_binding",
        "connect_timeout",
        "gssencmode",
        "keepalives",
        "keepalives_idle",
        "options",
        "passfile",
        "sslcert",
        "sslcrl",
        "sslkey",
        "sslmode",
        "sslrootcert",
        "target_session_attrs",
    }
)

RunBatch = Callable[[BatchRef, str], Awaitable[object]]  # (batch, worker id): `JobRunner.run`


class ProcrastinateQueue:
    """Implements `JobDispatcher` on procrastinate; `work` runs a worker. `close()` when done."""

    def __init__(self, dsn: str, store: PostgresJobStore, stale_after_s: float) -> None:
        # Connected on first use: a Postgres that is down when the service starts is no reason not to start.
        self._app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=libpq_conninfo(dsn)))
        self._store = store
        self._stale_after_s = stale_after_s
        self._opened = False
        self._opening = asyncio.Lock()

    async def close(self) -> None:
        if self._opened:
            await self._app.close_async()

    async def _ready(self) -> procrastinate.App:
        async with self._opening:
            if not self._opened:
                await self._store.apply_schema(SchemaManager.get_schema(), "procrastinate_jobs", _SCHEMA_LOCK_KEY)
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await self._app.open_async()
                except (TimeoutError, psycopg.Error, psycopg_pool.PoolTimeout) as error:
                    raise JobStoreUnavailable(f"the ingestion queue cannot reach Postgres: {error}") from error
                self._opened = True
        return self._app

    async def dispatch(self, batches: Sequence[BatchRef]) -> None:
        await self._ready()
        for ref in batches:
            lock = f"{ref.job_id}:{ref.batch}"
            with contextlib.suppress(AlreadyEnqueued):  # waiting in the queue already
                await self._app.configure_task(TASK, queue=QUEUE, queueing_lock=lock).defer_async(
                    job_id=ref.job_id, batch=ref.batch
                )
        await self._store.mark_dispatched(batches)

    async def work(self, run_batch: RunBatch, until_idle: bool = False) -> None:
        """Fetch and run batches until cancelled; with `until_idle`, return when the queue is empty."""
        worker = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"

        @self._app.task(name=TASK, queue=QUEUE)
        async def index_batch(job_id: str, batch: int) -> None:
            await run_batch(BatchRef(job_id, batch), worker)

        app = await self._ready()
        upkeep = asyncio.create_task(self._upkeep())
        try:
            await app.run_worker_async(
                queues=[QUEUE],
                name=worker,
                concurrency=1,
                wait=not until_idle,
                install_signal_handlers=False,
                delete_jobs="successful",
                update_heartbeat_interval=self._stale_after_s / 3,
                stalled_worker_timeout=self._stale_after_s,
            )
        finally:
            upkeep.cancel()
            await asyncio.gather(upkeep, return_exceptions=True)

    async def _upkeep(self) -> None:
        while True:
            try:
                await self.recover()
            except Exception:
                logger.warning("ingestion queue upkeep failed; tried again later", exc_info=True)
            await asyncio.sleep(self._stale_after_s / 2)

    async def recover(self) -> None:
        """Retry the jobs of dead workers; defer the batches that were stored and never deferred."""
        manager = (await self._ready()).job_manager
        for job in await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=self._stale_after_s):
            logger.warning("ingestion batch %s of a dead worker is queued again", job.task_kwargs)
            await manager.retry_job(job)
        undispatched = await self._store.undispatched(older_than_s=self._stale_after_s)
        if undispatched:
            logger.warning("%d ingestion batches were stored but never queued; queued now", len(undispatched))
            await self.dispatch(undispatched)


class ProcrastinateWorker:
    """A worker of this queue, as the CLI and the worker process run one."""

    def __init__(self, queue: ProcrastinateQueue, run_batch: RunBatch) -> None:
        self._queue = queue
        self._run_batch = run_batch

    async def run(self, job_id: str | None = None, until_idle: bool = False) -> None:
        """Run batches as they come (any job's: `job_id` is for the embedded worker); with `until_idle`, return
        when the queue is empty."""
        del job_id
        await self._queue.work(self._run_batch, until_idle)


def libpq_conninfo(dsn: str) -> str:
    """The DSN for libpq (psycopg): query parameters asyncpg sends as server settings (`search_path=...`) go in
    `options` as `-c name=value`."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query)
    kept = [(key, value) for key, value in query if key in _LIBPQ_KEYWORDS and key != "options"]
    options = [value for key, value in query if key == "options"]
    options += [f"-c {key}={value}" for key, value in query if key not in _LIBPQ_KEYWORDS]
    if options:
        kept.append(("options", " ".join(options)))
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote)))  # libpq reads no '+' as a space
