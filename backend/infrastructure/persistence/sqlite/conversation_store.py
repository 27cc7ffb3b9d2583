"""ConversationStore on one SQLite file (aiosqlite): the durable default when no Postgres is configured.

Several processes may share the file: WAL lets readers run beside the one writer, `busy_timeout`
makes writers wait for each other instead of failing, and `BEGIN IMMEDIATE` takes the write lock up
front so a read-then-write transaction cannot deadlock on lock upgrade.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from backend.domain.conversation import FeedbackRecord, NewMessage, Role, StartedTurn, StoredMessage, newest_others
from backend.domain.errors import ConversationStoreUnavailable, NotFound, QuestionCleared
from backend.infrastructure.persistence.common import (
    citations_from_json,
    citations_to_json,
    dump_json,
    page_request,
    parse_id,
)

SCHEMA_VERSION = 3

# Mirrors scripts/db/init_chat_history.sql in SQLite's dialect: ids are uuid text, times ISO-8601 UTC text.
_SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS schema_version (
        version    INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS conversations (
        id         TEXT PRIMARY KEY,
        user_id    TEXT NOT NULL,
        session_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (user_id, session_id)
    )""",
    # AUTOINCREMENT: seq is never reused, so it orders messages even when created_at ties.
    """CREATE TABLE IF NOT EXISTS messages (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        id              TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        role            TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
        content         TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        citations       TEXT NOT NULL DEFAULT '[]',
        consulted       TEXT NOT NULL DEFAULT '[]',
        debug           TEXT,
        completed       INTEGER NOT NULL DEFAULT 1 CHECK (completed IN (0, 1)),
        request_id      TEXT,
        reply_to        TEXT REFERENCES messages (id) ON DELETE CASCADE
    )""",
    "CREATE INDEX IF NOT EXISTS messages_conversation_seq_idx ON messages (conversation_id, seq)",
    """CREATE UNIQUE INDEX IF NOT EXISTS messages_request_once_idx
        ON messages (conversation_id, request_id, role) WHERE request_id IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS feedback (
        id          TEXT PRIMARY KEY,
        message_id  TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        query       TEXT NOT NULL DEFAULT '',
        is_positive INTEGER NOT NULL CHECK (is_positive IN (0, 1)),
        thread_id   TEXT NOT NULL DEFAULT '',
        agent_type  TEXT NOT NULL DEFAULT '',
        created_at  TEXT NOT NULL,
        metadata    TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX IF NOT EXISTS feedback_message_idx ON feedback (message_id)",
)
# Versions 2 and 3 on a file written by an earlier version (the columns are in CREATE TABLE for new files).
_ADDED_COLUMNS = {
    "reply_to": "ALTER TABLE messages ADD COLUMN reply_to TEXT REFERENCES messages (id) ON DELETE CASCADE",
    "consulted": "ALTER TABLE messages ADD COLUMN consulted TEXT NOT NULL DEFAULT '[]'",
}
_INDEX_REPLY_TO = "CREATE INDEX IF NOT EXISTS messages_reply_to_idx ON messages (reply_to) WHERE reply_to IS NOT NULL"

_MESSAGE_COLUMNS = "id, conversation_id, role, content, created_at, citations, consulted, debug, completed, request_id"

_UPSERT_CONVERSATION = """
    INSERT INTO conversations (id, user_id, session_id, created_at, updated_at)
    VALUES (:id, :user_id, :session_id, :now, :now)
    ON CONFLICT (user_id, session_id) DO UPDATE SET updated_at = excluded.updated_at
    RETURNING id
"""
_INSERT_MESSAGE = f"""
    INSERT INTO messages ({_MESSAGE_COLUMNS}, reply_to)
    VALUES (
        :id, :conversation_id, :role, :content, :created_at, :citations, :consulted, :debug, :completed, :request_id,
        :reply_to
    )
    ON CONFLICT (conversation_id, request_id, role) WHERE request_id IS NOT NULL DO NOTHING
    RETURNING {_MESSAGE_COLUMNS}
"""
_SELECT_BY_REQUEST = f"""
    SELECT {_MESSAGE_COLUMNS} FROM messages
    WHERE conversation_id = :conversation_id AND request_id = :request_id AND role = :role
"""
# LIMIT -1 means "no limit" in SQLite; the newest rows come first and are reversed in Python.
_SELECT_PAGE = f"""
    SELECT {_MESSAGE_COLUMNS} FROM messages
    WHERE conversation_id = :conversation_id AND seq < :before_seq
    ORDER BY seq DESC LIMIT :limit
"""
_INSERT_OWNED_FEEDBACK = """
    INSERT INTO feedback (id, message_id, query, is_positive, thread_id, agent_type, created_at, metadata)
    SELECT :id, m.id, :query, :is_positive, :thread_id, :agent_type, :created_at, :metadata
    FROM messages AS m JOIN conversations AS c ON c.id = m.conversation_id
    WHERE m.id = :message_id AND c.user_id = :user_id
"""
_NO_CURSOR = 2**63 - 1  # larger than any seq


class SqliteConversationStore:
    """History in one SQLite file. Use `await SqliteConversationStore.open(path)`; `close()` when done."""

    def __init__(self, connection: aiosqlite.Connection, path: Path) -> None:
        self._db = connection
        self._path = path
        # One connection serves every coroutine: the lock keeps each transaction to itself.
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_ms: int = 5000) -> SqliteConversationStore:
        """Open (creating the file, its parent directories and the schema as needed)."""
        target = Path(path)
        with _translate(f"cannot open the SQLite conversation store at {target}"):
            await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
            # `timeout` is sqlite3's busy timeout: wait this long for another writer's lock.
            connection = await aiosqlite.connect(target, isolation_level=None, timeout=busy_timeout_ms / 1000)
        store = cls(connection, target)
        try:
            await store._prepare()
        except BaseException:
            await connection.close()
            raise
        return store

    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            await self._db.close()

    async def ping(self) -> None:
        async with self._session():
            await self._db.execute_fetchall("SELECT 1")

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        async with self._session():
            return await self._upsert_conversation(user_id, session_id)

    async def start_turn(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        async with self._session(), self._transaction():
            key = await self._upsert_conversation(user_id, session_id)
            # Read before the insert: the newest rows without this turn's message, plus one for a replayed one.
            page = {"conversation_id": key, "before_seq": _NO_CURSOR, "limit": history_limit + 1}
            newest_first = await self._db.execute_fetchall(_SELECT_PAGE, page) if history_limit > 0 else []
            stored = await self._insert_message(_message_params(key, message))
        earlier = [_to_message(row) for row in reversed(list(newest_first))]
        return StartedTurn(key, stored, newest_others(earlier, stored.id, history_limit))

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None:
        async with self._session():
            rows = await self._db.execute_fetchall(
                "SELECT id FROM conversations WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            )
        return next((str(row["id"]) for row in rows), None)

    async def append_message(self, conversation_id: str, message: NewMessage) -> StoredMessage:
        key = str(parse_id(conversation_id, "conversation"))
        params = _message_params(key, message)
        async with self._session(), self._transaction():
            touched = await self._db.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", (params["created_at"], key)
            )
            if touched.rowcount == 0:
                raise NotFound(f"conversation {conversation_id!r} not found")
            try:
                return await self._insert_message(params)
            except sqlite3.IntegrityError as exc:
                if "FOREIGN KEY" not in str(exc):  # the conversation is there: the key missed is `reply_to`
                    raise
                raise QuestionCleared from exc

    async def list_messages(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> list[StoredMessage]:
        page = page_request(conversation_id, limit, before)
        key, cursor = str(page.conversation), None if page.before is None else str(page.before)
        async with self._session():
            before_seq = _NO_CURSOR if cursor is None else await self._seq_of(key, cursor)
            rows = await self._db.execute_fetchall(
                _SELECT_PAGE,
                {"conversation_id": key, "before_seq": before_seq, "limit": -1 if limit is None else limit},
            )
        return [_to_message(row) for row in reversed(list(rows))]

    async def clear_messages(self, conversation_id: str) -> int:
        key = str(parse_id(conversation_id, "conversation"))
        async with self._session(), self._transaction():
            # Counted first: SQLite's rowcount leaves out the answers that go with their questions (ON DELETE CASCADE).
            rows = await self._db.execute_fetchall("SELECT count(*) FROM messages WHERE conversation_id = ?", (key,))
            await self._db.execute("DELETE FROM messages WHERE conversation_id = ?", (key,))
            return int(next(iter(rows))[0])

    async def add_feedback(self, user_id: str, feedback: FeedbackRecord) -> str:
        message_id = str(parse_id(feedback.message_id, "message"))
        feedback_id = str(uuid.uuid4())
        params = {
            "id": feedback_id,
            "message_id": message_id,
            "user_id": user_id,
            "query": feedback.query,
            "is_positive": int(feedback.is_positive),
            "thread_id": feedback.thread_id,
            "agent_type": feedback.agent_type,
            "created_at": _now(),
            "metadata": dump_json(feedback.metadata),
        }
        async with self._session():
            inserted = await self._db.execute(_INSERT_OWNED_FEEDBACK, params)
            if inserted.rowcount == 0:  # no such message, or it belongs to someone else
                raise NotFound(f"message {feedback.message_id!r} not found")
        return feedback_id

    async def _prepare(self) -> None:
        self._db.row_factory = sqlite3.Row
        async with self._session():
            await self._db.execute("PRAGMA journal_mode = WAL")
            await self._db.execute("PRAGMA synchronous = NORMAL")  # WAL keeps this crash-safe
            await self._db.execute("PRAGMA foreign_keys = ON")
            async with self._transaction():
                for statement in _SCHEMA:
                    await self._db.execute(statement)
                columns = await self._db.execute_fetchall("SELECT name FROM pragma_table_info('messages')")
                present = {row["name"] for row in columns}
                for column, statement in _ADDED_COLUMNS.items():
                    if column not in present:
                        await self._db.execute(statement)
                await self._db.execute(_INDEX_REPLY_TO)
                await self._db.executemany(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    [(version, _now()) for version in range(1, SCHEMA_VERSION + 1)],
                )

    async def _upsert_conversation(self, user_id: str, session_id: str) -> str:
        """The (user, session) conversation's id, created if new; inside `_session()`."""
        params = {"id": str(uuid.uuid4()), "user_id": user_id, "session_id": session_id, "now": _now()}
        rows = await self._db.execute_fetchall(_UPSERT_CONVERSATION, params)
        return str(next(iter(rows))["id"])

    async def _insert_message(self, params: dict[str, Any]) -> StoredMessage:
        """Store a message (params of `_message_params`), or return the one this request already stored."""
        rows = list(await self._db.execute_fetchall(_INSERT_MESSAGE, params))
        if not rows:  # the same request already stored this role's message
            rows = list(await self._db.execute_fetchall(_SELECT_BY_REQUEST, params))
        return _to_message(rows[0])

    async def _seq_of(self, conversation_id: str, message_id: str) -> int:
        rows = await self._db.execute_fetchall(
            "SELECT seq FROM messages WHERE id = ? AND conversation_id = ?", (message_id, conversation_id)
        )
        for row in rows:
            return int(row["seq"])
        raise NotFound(f"message {message_id!r} not found in this conversation")

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[None]:
        """Exclusive use of the connection, with SQLite errors reported as `StoreUnavailable`."""
        async with self._lock:
            if self._closed:
                raise ConversationStoreUnavailable("the SQLite conversation store is closed")
            with _translate(f"the SQLite conversation store at {self._path} failed"):
                yield

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        await self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            await self._db.execute("ROLLBACK")
            raise
        await self._db.execute("COMMIT")


@contextmanager
def _translate(what: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise ConversationStoreUnavailable(f"{what}: {type(exc).__name__}: {exc}") from exc


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _message_params(conversation_id: str, message: NewMessage) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "role": message.role.value,
        "content": message.content,
        "created_at": _now(),
        "citations": dump_json(citations_to_json(message.citations)),
        "consulted": dump_json(citations_to_json(message.consulted)),
        "debug": None if message.debug is None else dump_json(message.debug),
        "completed": int(message.completed),
        "request_id": message.request_id,
        "reply_to": None if message.reply_to is None else str(parse_id(message.reply_to, "message")),
    }


def _to_message(row: sqlite3.Row) -> StoredMessage:
    debug = row["debug"]
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        content=row["content"],
        created_at=datetime.fromisoformat(row["created_at"]),
        citations=citations_from_json(json.loads(row["citations"])),
        consulted=citations_from_json(json.loads(row["consulted"])),
        debug=None if debug is None else json.loads(debug),
        completed=bool(row["completed"]),
        request_id=row["request_id"],
    )
