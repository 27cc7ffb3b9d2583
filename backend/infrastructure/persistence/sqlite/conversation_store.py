"""ConversationStore on one SQLite file (aiosqlite, through `SqliteDatabase`: several processes may share the
file): the durable default when no Postgres is configured."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from backend.domain.conversation import FeedbackRecord, NewMessage, Role, StartedTurn, StoredMessage, newest_others
from backend.domain.errors import ConversationStoreUnavailable, NotFound, QuestionCleared
from backend.infrastructure.persistence.common import (
    citations_from_json,
    citations_to_json,
    dump_json,
    page_request,
    parse_id,
)
from backend.infrastructure.persistence.sqlite.database import SqliteDatabase, utc_now

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

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database
        self._db = database.db  # used inside `session()` / `transaction()` only

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_ms: int = 5000) -> SqliteConversationStore:
        """Open (creating the file, its parent directories and the schema as needed)."""
        database = await SqliteDatabase.open(
            path, "SQLite conversation store", ConversationStoreUnavailable, busy_timeout_ms
        )
        store = cls(database)
        try:
            await store._prepare()
        except BaseException:
            await database.close()
            raise
        return store

    async def close(self) -> None:
        await self._database.close()

    async def ping(self) -> None:
        async with self._database.session():
            await self._db.execute_fetchall("SELECT 1")

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        async with self._database.session():
            return await self._upsert_conversation(user_id, session_id)

    async def start_turn(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        async with self._database.transaction():
            key = await self._upsert_conversation(user_id, session_id)
            # Read before the insert: the newest rows without this turn's message, plus one for a replayed one.
            page = {"conversation_id": key, "before_seq": _NO_CURSOR, "limit": history_limit + 1}
            newest_first = await self._db.execute_fetchall(_SELECT_PAGE, page) if history_limit > 0 else []
            stored = await self._insert_message(_message_params(key, message))
        earlier = [_to_message(row) for row in reversed(list(newest_first))]
        return StartedTurn(key, stored, newest_others(earlier, stored.id, history_limit))

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None:
        async with self._database.session():
            rows = await self._db.execute_fetchall(
                "SELECT id FROM conversations WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            )
        return next((str(row["id"]) for row in rows), None)

    async def append_message(self, conversation_id: str, message: NewMessage) -> StoredMessage:
        key = str(parse_id(conversation_id, "conversation"))
        params = _message_params(key, message)
        async with self._database.transaction():
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
        async with self._database.session():
            before_seq = _NO_CURSOR if cursor is None else await self._seq_of(key, cursor)
            rows = await self._db.execute_fetchall(
                _SELECT_PAGE,
                {"conversation_id": key, "before_seq": before_seq, "limit": -1 if limit is None else limit},
            )
        return [_to_message(row) for row in reversed(list(rows))]

    async def clear_messages(self, conversation_id: str) -> int:
        key = str(parse_id(conversation_id, "conversation"))
        async with self._database.transaction():
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
            "created_at": utc_now(),
            "metadata": dump_json(feedback.metadata),
        }
        async with self._database.session():
            inserted = await self._db.execute(_INSERT_OWNED_FEEDBACK, params)
            if inserted.rowcount == 0:  # no such message, or it belongs to someone else
                raise NotFound(f"message {feedback.message_id!r} not found")
        return feedback_id

    async def _prepare(self) -> None:
        async with self._database.transaction():
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
                [(version, utc_now()) for version in range(1, SCHEMA_VERSION + 1)],
            )

    async def _upsert_conversation(self, user_id: str, session_id: str) -> str:
        """The (user, session) conversation's id, created if new; inside a session."""
        params = {"id": str(uuid.uuid4()), "user_id": user_id, "session_id": session_id, "now": utc_now()}
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


def _message_params(conversation_id: str, message: NewMessage) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "role": message.role.value,
        "content": message.content,
        "created_at": utc_now(),
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
