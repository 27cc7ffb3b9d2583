"""The serving process's embedded worker, in a process of its own.

Indexing is CPU work (chunking, extraction, embedding): run by the serving process it would slow every chat turn,
through the event loop and through the interpreter lock. So the serving process starts a worker process (the
same `python -m backend worker` loop) when a job is dispatched, or at start when batches are waiting, starts it
again if it dies while batches wait, and stops it when serving stops. The worker exits by itself when the
serving process is gone (even after `kill -9`), and runs at a lower CPU priority.

Implements `JobDispatcher`: the batches go to the queue, and a worker is made sure to run.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.process import BaseProcess

from backend.application.ports.jobs import JobDispatcher
from backend.domain.jobs import BatchRef

logger = logging.getLogger(__name__)

WorkerMain = Callable[[int], None]  # the worker's entry point, given the serving process's pid (picklable)


class WorkerProcess:
    def __init__(
        self,
        main: WorkerMain,
        waiting: Callable[[], Awaitable[bool]],
        queue: JobDispatcher,
        watch_s: float = 2.0,
        stop_s: float = 10.0,
    ) -> None:
        self._main = main
        self._waiting = waiting  # whether batches wait for a worker
        self._queue = queue  # where the batches go (the SQLite store is a queue itself: nothing to do)
        self._watch_s = watch_s
        self._stop_s = stop_s
        self._process: BaseProcess | None = None
        self._watching: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.is_alive() else None

    async def start(self) -> None:
        """Watch over the worker from now on; start it when batches wait already (a restart after a crash)."""
        self._watching = asyncio.create_task(self._watch(), name="ingestion-worker-watch")
        if await self._batches_wait():
            self._ensure_running()

    async def dispatch(self, batches: Sequence[BatchRef]) -> None:
        await self._queue.dispatch(batches)
        if batches:
            self._ensure_running()

    async def stop(self) -> None:
        """Stop the worker: it hands back the batch it holds; killed if it does not exit in time."""
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        process, self._process = self._process, None
        if process is None or not process.is_alive():
            return
        process.terminate()
        await asyncio.to_thread(process.join, self._stop_s)
        if process.is_alive():
            logger.warning("ingestion worker %s did not stop in %g s; killed", process.pid, self._stop_s)
            process.kill()
            await asyncio.to_thread(process.join)

    def _ensure_running(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        if self._process is not None:
            logger.warning(
                "ingestion worker %s exited with %s; starting another", self._process.pid, self._process.exitcode
            )
        process = multiprocessing.get_context("spawn").Process(
            target=self._main, args=(os.getpid(),), name="ingestion-worker"
        )
        process.start()
        self._process = process
        logger.info("ingestion worker started (pid %s)", process.pid)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._watch_s)
            if (self._process is None or not self._process.is_alive()) and await self._batches_wait():
                self._ensure_running()

    async def _batches_wait(self) -> bool:
        try:
            return await self._waiting()
        except Exception as error:  # the job store is down: the watch asks again
            logger.warning("cannot tell whether ingestion batches wait: %s", error)
            return False
