"""ConversationStore on PostgreSQL through an asyncpg pool (SPEC §6; `PostgresDatabase`: start-up never fails
because Postgres is down, and a Postgres restart needs no service restart)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import asyncpg

from backend.domain.conversation import FeedbackRecord, NewMessage, Role, StartedTurn, StoredMessage, newest_others
from backend.domain.errors import (
    ConversationStoreUnavailable,
    NotFound,
    QuestionCleared,
)
from backend.infrastructure.persistence.common import (
    citations_from_json,
    citations_to_json,
    page_request,
    parse_id,
)
from backend.infrastructure.persistence.postgres.database import SCHEMA_DIR, PostgresDatabase

logger = logging.getLogger(__name__)

DEFAULT_SCHEMA_SQL_PATH = SCHEMA_DIR / "init_chat_history.sql"

# Any fixed 64-bit number works; every process applying this schema must use the same one.
_SCHEMA_LOCK_KEY = 0x6772_6167_6368_6174  # "gragchat"


_MESSAGE_COLUMNS = "id, conversation_id, role, content, created_at, citations, consulted, debug, completed, request_id"

_SELECT_CONVERSATION = "SELECT id FROM conversations WHERE user_id = $1 AND session_id = $2"
# Read first (every later turn finds the row without a write); concurrent first calls meet on the
# unique key: the loser's DO NOTHING returns no row and it reads the winner's.
_CREATE_CONVERSATION = """
    INSERT INTO conversations (user_id, session_id) VALUES ($1, $2)
    ON CONFLICT (user_id, session_id) DO NOTHING
    RETURNING id
"""
# One statement, one round trip: touching the conversation locks its row before the insert takes its
# seq, so appends to one conversation commit in seq order and a retried request waits for the first.
# No row back means: no such conversation, or this request already stored this role's message.
# `reply_to` is a foreign key: the insert takes a share lock on the question's row, so a clear deleting it either
# waits for the answer and takes it along (ON DELETE CASCADE), or wins and the insert fails.
_APPEND_MESSAGE = f"""
    WITH conversation AS (UPDATE conversations SET updated_at = now() WHERE id = $1 RETURNING id)
    INSERT INTO messages (conversation_id, role, content, citations, consulted, debug, completed, request_id, reply_to)
    SELECT id, $2, $3, $4, $5, $6, $7, $8, $9 FROM conversation
    ON CONFLICT (conversation_id, request_id, role) WHERE request_id IS NOT NULL DO NOTHING
    RETURNING {_MESSAGE_COLUMNS}
"""
# A turn's start in one statement and one round trip: the conversation upserted (its row locked, as an
# append locks it), the user message inserted, and the newest messages as they were before the statement
# (a statement's reads do not see its own writes). No `appended` row: this request stored it before.
_START_TURN = f"""
    WITH conversation AS (
        INSERT INTO conversations (user_id, session_id) VALUES ($1, $2)
        ON CONFLICT (user_id, session_id) DO UPDATE SET updated_at = now()
        RETURNING id
    ), appended AS (
        INSERT INTO messages (conversation_id, role, content, citations, consulted, debug, completed, request_id)
        SELECT id, $3, $4, $5, $6, $7, $8, $9 FROM conversation
        ON CONFLICT (conversation_id, request_id, role) WHERE request_id IS NOT NULL DO NOTHING
        RETURNING seq, {_MESSAGE_COLUMNS}
    )
    SELECT true AS appended, seq, {_MESSAGE_COLUMNS} FROM appended
    UNION ALL
    (
        SELECT false, seq, {_MESSAGE_COLUMNS} FROM messages
        WHERE conversation_id = (SELECT id FROM conversation)
        ORDER BY seq DESC LIMIT $10
    )
"""
_SELECT_BY_REQUEST = f"""
    SELECT {_MESSAGE_COLUMNS} FROM messages
    WHERE conversation_id = $1 AND request_id = $2 AND role = $3
"""
# Newest first so LIMIT keeps the newest rows (LIMIT NULL = all); reversed to oldest-first in Python.
_SELECT_PAGE = f"""
    SELECT {_MESSAGE_COLUMNS} FROM messages
    WHERE conversation_id = $1 AND ($2::bigint IS NULL OR seq < $2)
    ORDER BY seq DESC LIMIT $3
"""
_INSERT_OWNED_FEEDBACK = """
    INSERT INTO feedback (message_id, query, is_positive, thread_id, agent_type, metadata)
    SELECT m.id, $3, $4, $5, $6, $7
    FROM messages AS m JOIN conversations AS c ON c.id = m.conversation_id
    WHERE m.id = $1 AND c.user_id = $2
    RETURNING id
"""


class PostgresConversationStore:
    """History in Postgres. Build with `await PostgresConversationStore.open(dsn)`; `close()` when done."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._database = database

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema_sql_path: str | Path | None = None,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 30.0,
    ) -> PostgresConversationStore:
        """Connect and apply the schema (`PostgresDatabase.open`: a Postgres that is down is retried on use)."""
        database = await PostgresDatabase.open(
            dsn,
            schema_sql_path or DEFAULT_SCHEMA_SQL_PATH,
            "conversation store",
            ConversationStoreUnavailable,
            _SCHEMA_LOCK_KEY,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
        )
        return cls(database)

    @property
    def ready(self) -> bool:
        """Whether the pool is up and the schema applied (false while Postgres has never answered)."""
        return self._database.ready

    async def close(self) -> None:
        await self._database.close()

    async def ping(self) -> None:
        async with self._database.connection() as conn:
            await conn.fetchval("SELECT 1")

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        async with self._database.connection() as conn:
            found = await conn.fetchval(_SELECT_CONVERSATION, user_id, session_id)
            while found is None:  # loops only if the row we conflicted with is deleted meanwhile
                found = await conn.fetchval(_CREATE_CONVERSATION, user_id, session_id)
                found = found or await conn.fetchval(_SELECT_CONVERSATION, user_id, session_id)
        return str(found)

    async def start_turn(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        values = _message_values(message)
        # One more than asked: a replayed message is among the newest and is not history.
        window = history_limit + 1 if history_limit > 0 else 0
        async with self._database.connection() as conn:
            while True:
                rows = await conn.fetch(_START_TURN, user_id, session_id, *values, message.request_id, window)
                stored = next((row for row in rows if row["appended"]), None)
                if stored is not None:
                    break
                # A retry of a request whose message is stored: read it back (it is gone only if a
                # concurrent clear removed it, and then the next round stores it).
                conversation = await conn.fetchval(_SELECT_CONVERSATION, user_id, session_id)
                stored = await conn.fetchrow(_SELECT_BY_REQUEST, conversation, message.request_id, message.role.value)
                if stored is not None:
                    break
        earlier = [_to_message(row) for row in sorted(rows, key=lambda row: row["seq"]) if not row["appended"]]
        message_stored = _to_message(stored)
        return StartedTurn(
            message_stored.conversation_id, message_stored, newest_others(earlier, message_stored.id, history_limit)
        )

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None:
        async with self._database.connection() as conn:
            found = await conn.fetchval(_SELECT_CONVERSATION, user_id, session_id)
        return None if found is None else str(found)

    async def append_message(self, conversation_id: str, message: NewMessage) -> StoredMessage:
        key = parse_id(conversation_id, "conversation")
        values = _message_values(message)
        reply_to = None if message.reply_to is None else parse_id(message.reply_to, "message")
        async with self._database.connection() as conn:
            row = None
            while row is None:  # loops only if a concurrent clear removes the row we conflicted with
                try:
                    row = await conn.fetchrow(_APPEND_MESSAGE, key, *values, message.request_id, reply_to)
                except asyncpg.ForeignKeyViolationError as exc:
                    raise QuestionCleared from exc
                if row is not None:
                    break
                if message.request_id is not None:  # the same request may have stored this role's message
                    row = await conn.fetchrow(_SELECT_BY_REQUEST, key, message.request_id, message.role.value)
                if row is None and await conn.fetchval("SELECT 1 FROM conversations WHERE id = $1", key) is None:
                    raise NotFound(f"conversation {conversation_id!r} not found")
        return _to_message(row)

    async def list_messages(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> list[StoredMessage]:
        page = page_request(conversation_id, limit, before)
        key, cursor = page.conversation, page.before
        async with self._database.connection() as conn:
            before_seq = None
            if cursor is not None:
                before_seq = await conn.fetchval(
                    "SELECT seq FROM messages WHERE id = $1 AND conversation_id = $2", cursor, key
                )
                if before_seq is None:
                    raise NotFound(f"message {before!r} not found in this conversation")
            rows = await conn.fetch(_SELECT_PAGE, key, before_seq, limit)
        return [_to_message(row) for row in reversed(rows)]

    async def clear_messages(self, conversation_id: str) -> int:
        key = parse_id(conversation_id, "conversation")
        async with self._database.connection() as conn:
            status = await conn.execute("DELETE FROM messages WHERE conversation_id = $1", key)
        return int(str(status).rsplit(" ", 1)[-1])  # "DELETE <count>"

    async def add_feedback(self, user_id: str, feedback: FeedbackRecord) -> str:
        message_id = parse_id(feedback.message_id, "message")
        async with self._database.connection() as conn:
            try:
                feedback_id = await conn.fetchval(
                    _INSERT_OWNED_FEEDBACK,
                    message_id,
                    user_id,
                    feedback.query,
                    feedback.is_positive,
                    feedback.thread_id,
                    feedback.agent_type,
                    feedback.metadata,
                )
            except asyncpg.ForeignKeyViolationError:  # the message was deleted meanwhile
                feedback_id = None
        if feedback_id is None:  # no such message, or it belongs to someone else
            raise NotFound(f"message {feedback.message_id!r} not found")
        return str(feedback_id)


def _message_values(message: NewMessage) -> tuple[Any, ...]:
    """A message's role, content, sources, debug and completed, as the insert statements take them."""
    return (
        message.role.value,
        message.content,
        citations_to_json(message.citations),
        citations_to_json(message.consulted),
        message.debug,
        message.completed,
    )


def _to_message(row: Any) -> StoredMessage:
    return StoredMessage(
        id=str(row["id"]),
        conversation_id=str(row["conversation_id"]),
        role=Role(row["role"]),
        content=row["content"],
        created_at=row["created_at"],
        citations=citations_from_json(row["citations"]),
        consulted=citations_from_json(row["consulted"]),
        debug=row["debug"],
        completed=row["completed"],
        request_id=row["request_id"],
    )
