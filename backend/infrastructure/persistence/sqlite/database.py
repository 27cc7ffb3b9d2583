"""One SQLite file through one aiosqlite connection, shared by a store's coroutines one at a time.

Several processes may share the file: WAL lets readers run beside the one writer, `busy_timeout` makes writers
wait for each other instead of failing, and `BEGIN IMMEDIATE` takes the write lock up front so a read-then-write
transaction cannot deadlock on lock upgrade. SQLite and file errors surface as the store's `unavailable` error.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite

from backend.domain.errors import StoreUnavailable


class SqliteDatabase:
    """Open with `await SqliteDatabase.open(path, what, unavailable)`; `close()` when done."""

    def __init__(self, connection: aiosqlite.Connection, path: Path, what: str, unavailable: type[StoreUnavailable]):
        self.db = connection
        self.path = path
        self._what = what
        self._unavailable = unavailable
        self._lock = asyncio.Lock()  # one connection serves every coroutine: each transaction to itself
        self._closed = False

    @classmethod
    async def open(
        cls, path: str | Path, what: str, unavailable: type[StoreUnavailable], busy_timeout_ms: int = 5000
    ) -> SqliteDatabase:
        """Open the file (creating it and its parent directories as needed) in WAL mode."""
        target = Path(path)
        with translate(f"cannot open the {what} at {target}", unavailable):
            await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
            # `timeout` is sqlite3's busy timeout: wait this long for another writer's lock.
            connection = await aiosqlite.connect(target, isolation_level=None, timeout=busy_timeout_ms / 1000)
        connection.row_factory = sqlite3.Row
        database = cls(connection, target, what, unavailable)
        try:
            async with database.session():
                await connection.execute("PRAGMA journal_mode = WAL")
                await connection.execute("PRAGMA synchronous = NORMAL")  # WAL keeps this crash-safe
                await connection.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await connection.close()
            raise
        return database

    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            await self.db.close()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[aiosqlite.Connection]:
        """Exclusive use of the connection."""
        async with self._lock:
            if self._closed:
                raise self._unavailable(f"the {self._what} is closed")
            with translate(f"the {self._what} at {self.path} failed", self._unavailable):
                yield self.db

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction in a session: committed when the block ends, rolled back when it raises."""
        async with self.session() as db:
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")


@contextmanager
def translate(what: str, unavailable: type[StoreUnavailable]) -> Iterator[None]:
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise unavailable(f"{what}: {type(exc).__name__}: {exc}") from exc


def utc_now() -> str:
    """Now as ISO-8601 UTC text with microseconds: sorts as it reads."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
