"""The embedded worker: takes batches from the SQLite job store and runs them, one at a time.

A batch whose worker died (no heartbeat for `stale_after_s`: the runner sends them) is taken by the next worker
that asks. A batch that raises is handed back at once, for the next claim.
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

RunBatch = Callable[[BatchRef, str], Awaitable[object]]  # (batch, worker id): `JobRunner.run`


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
        while True:
            ref = await self._store.claim(self.worker_id, self._stale_after_s, job_id)
            if ref is None:
                if until_idle:
                    return
                await asyncio.sleep(self._poll_s)
                continue
            try:
                await self._run_batch(ref, self.worker_id)
            except Exception:  # handed back by the runner: the next claim takes it
                logger.exception("batch %d of job %s failed; it is handed back", ref.batch, ref.job_id)
                await asyncio.sleep(self._poll_s)
