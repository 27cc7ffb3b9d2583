"""SQLite connections that run in worker threads and can be interrupted when the awaiting task is cancelled."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_BUSY_TIMEOUT_S = 10.0
_PROGRESS_EVERY = 1000  # VM instructions between checks of the cancel flag


class CancellableConnection:
    """One SQLite connection, used by one worker thread at a time, whose work can be cancelled."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self._cancelled = threading.Event()
        # The flag covers a cancel that lands before the statement starts (interrupt() alone would miss it).
        raw.set_progress_handler(self._should_abort, _PROGRESS_EVERY)

    def _should_abort(self) -> int:
        return 1 if self._cancelled.is_set() else 0

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        self._cancelled.clear()
        task = asyncio.ensure_future(asyncio.to_thread(work, self.raw))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cancelled.set()
            self.raw.interrupt()
            await _wait_for_thread(task)
            raise

    def close(self) -> None:
        self.raw.close()


async def _wait_for_thread(task: asyncio.Future[Any]) -> None:
    """Wait until the (interrupted) worker thread has returned, even if cancelled again meanwhile."""
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            continue
    if not task.cancelled() and task.exception() is not None:
        logger.debug("graph store query ended after cancellation: %r", task.exception())


def in_transaction(
    raw: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], begin: str = "BEGIN IMMEDIATE"
) -> T:
    """Run `work` in one transaction: committed whole or rolled back whole."""
    if raw.in_transaction:  # left over by a failed rollback; never build on it
        raw.execute("ROLLBACK")
    raw.execute(begin)
    try:
        result = work(raw)
        raw.execute("COMMIT")
    except BaseException:
        # An interrupted statement may already have rolled the transaction back.
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return result


def read_snapshot(work: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
    """`work` wrapped in one read transaction, so its statements all see the same committed state."""
    return lambda raw: in_transaction(raw, work, "BEGIN")


def connect(path: Path) -> sqlite3.Connection:
    raw = sqlite3.connect(str(path), timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    # FULL: a committed write survives a power cut too (in WAL mode it costs one fsync per transaction).
    raw.execute("PRAGMA synchronous = FULL")
    return raw


def open_connections(
    path: Path, readers: int, prepare: Callable[[sqlite3.Connection], None]
) -> list[sqlite3.Connection]:
    """The writer (first, after `prepare` ran in a transaction on it) and the readers; all closed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opened: list[sqlite3.Connection] = []
    try:
        opened.append(connect(path))
        opened[0].execute("PRAGMA journal_mode = WAL")
        in_transaction(opened[0], prepare)
        opened.extend(connect(path) for _ in range(readers))
    except BaseException:
        for raw in opened:
            raw.close()
        raise
    return opened
