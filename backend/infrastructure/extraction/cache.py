"""A small persistent cache of model answers, keyed by a content hash of the request.

One SQLite file (e.g. `DATA_DIR/llm_cache.db`) through aiosqlite: every statement runs on the
connection's own thread, one at a time, so any number of tasks of one event loop may use the cache
concurrently. WAL and a busy timeout let several processes share the file.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import orjson

from backend.domain.errors import StoreUnavailable

_SCHEMA = """CREATE TABLE IF NOT EXISTS llm_cache (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    model      TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
)"""


def cache_key(model_name: str, messages: Sequence[tuple[str, str]]) -> str:
    """sha256 of the model name and the exact (role, content) messages: same request, same key."""
    payload = orjson.dumps([model_name, [[role, content] for role, content in messages]])
    return hashlib.sha256(payload).hexdigest()


class ExtractionCache:
    """get/put of model answers by key. Use `await ExtractionCache.open(path)` and `await cache.close()`."""

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._db = connection

    @classmethod
    async def open(cls, path: str | Path) -> ExtractionCache:
        """Open (creating if needed) the cache file; ":memory:" gives a private in-memory cache."""
        target = str(path)
        if target != ":memory:":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = await aiosqlite.connect(target)
            try:
                await connection.execute("PRAGMA busy_timeout = 5000")
                if target != ":memory:":
                    await connection.execute("PRAGMA journal_mode = WAL")
                await connection.execute(_SCHEMA)
                await connection.commit()
            except BaseException:
                await connection.close()
                raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the model cache at {target}: {exc}") from exc
        return cls(connection)

    async def close(self) -> None:
        await self._db.close()

    async def get(self, key: str) -> str | None:
        try:
            async with self._db.execute("SELECT value FROM llm_cache WHERE key = ?", (key,)) as cursor:
                row = await cursor.fetchone()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"model cache read failed: {exc}") from exc
        return None if row is None else str(row[0])

    async def put(self, key: str, value: str, model: str = "") -> None:
        created_at = datetime.now(UTC).isoformat()
        try:
            await self._db.execute(
                "INSERT OR REPLACE INTO llm_cache (key, value, model, created_at) VALUES (?, ?, ?, ?)",
                (key, value, model, created_at),
            )
            await self._db.commit()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"model cache write failed: {exc}") from exc

    async def count(self) -> int:
        async with self._db.execute("SELECT COUNT(*) FROM llm_cache") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0
