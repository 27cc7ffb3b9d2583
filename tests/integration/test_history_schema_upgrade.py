"""A history written by schema version 1 (no `reply_to`, no `consulted`) opens under version 3: its messages are
kept, answers stored from then on go with their questions and keep their consulted sources apart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from backend.domain.conversation import Citation, NewMessage, Role
from backend.domain.errors import QuestionCleared
from backend.infrastructure.persistence.postgres import PostgresConversationStore
from backend.infrastructure.persistence.sqlite import SqliteConversationStore
from backend.infrastructure.persistence.sqlite.conversation_store import _SCHEMA

_LATER_COLUMNS = (
    "\n        consulted       TEXT NOT NULL DEFAULT '[]',",
    ",\n        reply_to        TEXT REFERENCES messages (id) ON DELETE CASCADE",
)
CITED = Citation("c1", "Cited", "d1", "d1#0", "cited text")
CONSULTED = Citation("c2", "Consulted", "d2", "d2#0", "consulted text")


def _version_1(statement: str) -> str:
    for column in _LATER_COLUMNS:
        statement = statement.replace(column, "")
    assert "reply_to" not in statement and "consulted" not in statement
    return statement


async def _check_upgraded(store: PostgresConversationStore | SqliteConversationStore) -> None:
    conversation = await store.get_or_create_conversation_id("alice", "s1")
    assert [m.content for m in await store.list_messages(conversation)] == ["from version 1"]
    turn = await store.start_turn("alice", "s1", NewMessage(Role.USER, "question", request_id="r1"), history_limit=5)
    answer = NewMessage(Role.ASSISTANT, "answer [1]", (CITED,), (CONSULTED,), request_id="r1", reply_to=turn.message.id)
    await store.append_message(conversation, answer)
    stored = (await store.list_messages(conversation))[-1]
    assert (stored.citations, stored.consulted) == ((CITED,), (CONSULTED,))
    assert await store.clear_messages(conversation) == 3
    with pytest.raises(QuestionCleared):
        await store.append_message(conversation, NewMessage(Role.ASSISTANT, "late", reply_to=turn.message.id))


async def test_a_version_1_sqlite_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as db:
        for statement in _SCHEMA:
            db.execute(_version_1(statement))
        db.execute("INSERT INTO schema_version VALUES (1, '2026-01-01T00:00:00+00:00')")
        db.execute("INSERT INTO conversations VALUES ('00000000-0000-4000-8000-000000000001', 'alice', 's1', 'x', 'x')")
        db.execute(
            "INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES "
            "('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'user', "
            "'from version 1', '2026-01-01T00:00:00+00:00')"
        )

    store = await SqliteConversationStore.open(path)
    try:
        await _check_upgraded(store)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert [row[0] for row in db.execute("SELECT version FROM schema_version ORDER BY version")] == [1, 2, 3]


@pytest.mark.postgres
async def test_a_version_1_postgres_schema_is_upgraded_in_place(isolated_postgres_dsn: str) -> None:
    store = await PostgresConversationStore.open(isolated_postgres_dsn)
    await store.close()
    conn = await asyncpg.connect(isolated_postgres_dsn)
    try:  # back to version 1
        await conn.execute("ALTER TABLE messages DROP COLUMN reply_to, DROP COLUMN consulted")
        await conn.execute("DELETE FROM schema_version WHERE version > 1")
        conversation = await conn.fetchval(
            "INSERT INTO conversations (user_id, session_id) VALUES ('alice', 's1') RETURNING id"
        )
        await conn.execute(
            "INSERT INTO messages (conversation_id, role, content) VALUES ($1, 'user', 'from version 1')", conversation
        )
    finally:
        await conn.close()

    store = await PostgresConversationStore.open(isolated_postgres_dsn)
    try:
        await _check_upgraded(store)
    finally:
        await store.close()
    conn = await asyncpg.connect(isolated_postgres_dsn)
    try:
        assert [row["version"] for row in await conn.fetch("SELECT version FROM schema_version ORDER BY 1")] == [
            1,
            2,
            3,
        ]
    finally:
        await conn.close()
