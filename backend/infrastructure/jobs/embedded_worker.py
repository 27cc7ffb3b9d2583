"""The embedded worker: takes batches from the SQLite job store and runs them, one at a time.

While it holds a batch it sends heartbeats; a batch whose worker died (no heartbeat for `stale_after_s`) is taken
by the next worker that asks. A batch that raises is handed back at once, for the next claim.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable

from backend.domain.jobs import BatchRef
from backend.infrastructure.jobs.sqlite_store import SqliteJobStore

logger = logging.getLogger(__name__)

RunBatch = Callable[[BatchRef], Awaitable[object]]


class EmbeddedWorker:
    def __init__(
        self, store: SqliteJobStore, run_batch: RunBatch, poll_s: float = 0.5, stale_after_s: float = 30.0
    ) -> None:
        self._store = store
        self._run_batch = run_batch
        self._poll_s = poll_s
        self._stale_after_s = stale_after_s
        self.worker_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"

    async def run(self, job_id: str | None = None, until_idle: bool = False) -> None:
        """Run batches as they come (only `job_id`'s, when given); with `until_idle`, return when none is left."""
        beating = asyncio.create_task(self._beat())
        try:
            while True:
                ref = await self._store.claim(self.worker_id, self._stale_after_s, job_id)
                if ref is None:
                    if until_idle:
                        return
                    await asyncio.sleep(self._poll_s)
                    continue
                await self._run(ref)
        finally:
            beating.cancel()
            await asyncio.gather(beating, return_exceptions=True)

    async def _run(self, ref: BatchRef) -> None:
        try:
            await self._run_batch(ref)
        except asyncio.CancelledError:
            await asyncio.shield(self._store.release(ref))  # stopped: the next worker takes it at once
            raise
        except Exception:
            logger.exception("batch %d of job %s failed; it is handed back", ref.batch, ref.job_id)
            await self._store.release(ref)
            await asyncio.sleep(self._poll_s)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._stale_after_s / 3)
            try:
                await self._store.heartbeat(self.worker_id)
            except Exception:
                logger.warning("worker %s could not send its heartbeat", self.worker_id, exc_info=True)
