"""One Postgres database through an asyncpg pool, with the store's schema applied when it first connects.

Start-up never fails because Postgres is down: `open()` returns a database that is not ready yet, and each use
tries to connect (and apply the schema) again, raising the store's `unavailable` error until it works. Once the
pool exists, asyncpg replaces broken connections by itself, so a Postgres restart needs no service restart
either. The schema is applied in one transaction holding an advisory lock: several processes may start together,
and CREATE ... IF NOT EXISTS alone can still collide.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.infrastructure.persistence.common import dump_json

logger = logging.getLogger(__name__)

SCHEMA_DIR = Path(__file__).resolve().parents[4] / "scripts" / "db"

# What the driver raises when the server is unreachable, restarting or failing.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,  # includes TimeoutError and refused/reset connections
)


class PostgresDatabase:
    def __init__(
        self,
        dsn: str,
        schema_sql: str,
        what: str,
        unavailable: type[StoreUnavailable],
        schema_lock_key: int,
        pool_options: dict[str, Any],
    ) -> None:
        self._dsn = dsn
        self._target = describe_dsn(dsn)
        self._schema_sql = schema_sql
        self._what = what
        self._unavailable = unavailable
        self._schema_lock_key = schema_lock_key  # any fixed 64-bit number: the same in every process
        self._pool_options = pool_options
        self._pool: Any = None  # asyncpg.Pool once connected and the schema is applied
        self._connect_lock = asyncio.Lock()
        self._attempts = 0
        self._last_error = ""
        self._closed = False

    @classmethod
    async def open(
        cls,
        dsn: str,
        schema_sql_path: str | Path,
        what: str,
        unavailable: type[StoreUnavailable],
        schema_lock_key: int,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 30.0,
    ) -> PostgresDatabase:
        """Connect and apply the schema; if Postgres is unreachable, log a warning and retry on use.

        Raises only for mistakes no retry can fix: a DSN that is not a postgres URL, a missing schema file.
        Server settings such as `search_path` may be given as DSN query parameters.
        """
        if urlsplit(dsn).scheme not in ("postgres", "postgresql"):
            raise ValueError(f"not a postgres:// or postgresql:// DSN: {describe_dsn(dsn)}")
        schema_sql = await asyncio.to_thread(Path(schema_sql_path).read_text, encoding="utf-8")
        options = {"min_size": min_size, "max_size": max_size, "timeout": connect_timeout}
        database = cls(
            dsn, schema_sql, what, unavailable, schema_lock_key, options | {"command_timeout": command_timeout}
        )
        try:
            await database._ready_pool()
        except StoreUnavailable as exc:
            logger.warning("%s not ready, will retry on use: %s", what, exc.message)
        return database

    @property
    def ready(self) -> bool:
        """Whether the pool is up and the schema applied (false while Postgres has never answered)."""
        return self._pool is not None

    async def close(self) -> None:
        self._closed = True
        async with self._connect_lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), timeout=10)
        except TimeoutError:  # a connection stuck in a query must not block shutdown forever
            pool.terminate()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection; driver and network failures surface as the store's `unavailable` error."""
        pool = await self._ready_pool()
        try:
            async with pool.acquire() as conn:
                yield conn
        except asyncpg.DataError as exc:
            # The server refused a value (text the guard let through that its encoding cannot hold): the input is
            # bad, the store is fine. The driver's words are for the log, not the client.
            logger.warning("the %s refused a value: %s", self._what, describe_error(exc))
            raise InvalidRequest(f"the {self._what} cannot hold this text") from exc
        except DRIVER_ERRORS as exc:
            raise self._unavailable(f"{self._unavailable_text()}: {describe_error(exc)}") from exc

    async def _ready_pool(self) -> Any:
        if self._closed:
            raise self._unavailable(f"the Postgres {self._what} is closed")
        if self._pool is not None:
            return self._pool
        attempt = self._attempts
        async with self._connect_lock:
            if self._pool is not None:
                return self._pool
            if self._attempts != attempt:
                # Another caller tried while we waited and failed: report that rather than queueing
                # every waiting request behind its own connect timeout.
                raise self._unavailable(self._last_error)
            self._attempts += 1
            try:
                self._pool = await self._connect()
            except DRIVER_ERRORS as exc:
                self._last_error = f"{self._unavailable_text()}: {describe_error(exc)}"
                raise self._unavailable(self._last_error) from exc
            logger.info("%s connected to %s", self._what, self._target)
            return self._pool

    async def _connect(self) -> Any:
        pool = await asyncpg.create_pool(self._dsn, init=_init_connection, reset=_keep_session, **self._pool_options)
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", self._schema_lock_key)
                await conn.execute(self._schema_sql)
        except BaseException:
            pool.terminate()
            raise
        return pool

    def _unavailable_text(self) -> str:
        return f"Postgres {self._what} at {self._target} is unavailable"


async def _keep_session(conn: Any) -> None:
    """Released connections skip asyncpg's default reset query (a round trip per store call): the stores
    set no session state, listen to nothing and take only transaction-scoped advisory locks. An open
    transaction is still rolled back by asyncpg before this runs."""


async def _init_connection(conn: Any) -> None:
    # jsonb in and out as Python values: lists of dicts, and dicts.
    await conn.set_type_codec("jsonb", encoder=dump_json, decoder=json.loads, schema="pg_catalog")


def describe_dsn(dsn: str) -> str:
    """`user@host:port/database` — the DSN without its password (or anything else secret) for logs."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "<unparsable DSN>"
    user = f"{parts.username}@" if parts.username else ""
    return f"{user}{host}:{port}{parts.path or '/'}"


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
