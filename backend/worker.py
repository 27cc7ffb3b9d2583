"""The ingestion worker: `python -m backend worker`, and the process the server starts for its jobs.

It takes the batches of the jobs in the data folder's job store and indexes them, one at a time, until it is
stopped (SIGTERM or SIGINT: the batch it holds is handed back) or, when a serving process started it, until that
process is gone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal

from backend.bootstrap import open_ingestion
from backend.infrastructure.config.settings import Settings
from backend.infrastructure.jobs.worker_process import WorkerMain
from backend.infrastructure.logging import configure_logging

logger = logging.getLogger(__name__)

NICENESS = 10  # a worker started by the serving process yields the CPU to chat turns
PARENT_CHECK_S = 1.0


def worker_main(settings: Settings) -> WorkerMain:
    """The entry point of a worker process the serving process starts (picklable: the process is spawned)."""
    return functools.partial(run_worker, settings)


def run_worker(settings: Settings, parent_pid: int | None = None) -> None:
    configure_logging(settings.server.log_level, settings.known_secrets())
    if parent_pid is not None:
        os.nice(NICENESS)
    asyncio.run(_work(settings, parent_pid))


async def _work(settings: Settings, parent_pid: int | None) -> None:
    async with open_ingestion(settings) as ingestion:
        work = asyncio.create_task(ingestion.worker.run())
        loop = asyncio.get_running_loop()
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, work.cancel)
        orphaned = asyncio.create_task(_orphaned(parent_pid, work)) if parent_pid is not None else None
        logger.info("ingestion worker %s is taking batches", os.getpid())
        try:
            await work
        except asyncio.CancelledError:
            logger.info("ingestion worker %s stopped", os.getpid())
        finally:
            if orphaned is not None:
                orphaned.cancel()


async def _orphaned(parent_pid: int, work: asyncio.Task[None]) -> None:
    while True:  # no event says the parent is gone: its child is handed to another parent
        await asyncio.sleep(PARENT_CHECK_S)
        if os.getppid() != parent_pid:
            break
    logger.warning("the serving process %s is gone: the ingestion worker stops", parent_pid)
    work.cancel()
