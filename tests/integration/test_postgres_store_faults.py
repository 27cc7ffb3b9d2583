"""The Postgres store when the server is away, comes back, or is being set up by several processes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from backend.domain.conversation import NewMessage, Role
from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.infrastructure.persistence.postgres import PostgresConversationStore
from tests.support.tcp_forwarder import TcpForwarder, closed_port

SECRET = "s3cret-pa55"


def _via_port(dsn: str, port: int) -> str:
    parts = urlsplit(dsn)
    credentials, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{port}"))


@pytest.fixture
async def unreachable_store(caplog: pytest.LogCaptureFixture) -> AsyncIterator[PostgresConversationStore]:
    dsn = f"postgresql://graphrag:{SECRET}@127.0.0.1:{closed_port()}/graphrag_test"
    with caplog.at_level(logging.WARNING):
        store = await PostgresConversationStore.open(dsn, connect_timeout=2)
    yield store
    await store.close()


async def test_open_against_a_closed_port_returns_a_not_ready_store(
    unreachable_store: PostgresConversationStore, caplog: pytest.LogCaptureFixture
) -> None:
    assert unreachable_store.ready is False
    logged = [r.getMessage() for r in caplog.get_records("setup") if r.levelno == logging.WARNING]
    assert any("not ready" in text and "127.0.0.1" in text for text in logged)
    assert not any(SECRET in text for text in logged)


async def test_operations_on_an_unreachable_server_raise_store_unavailable(
    unreachable_store: PostgresConversationStore,
) -> None:
    with pytest.raises(StoreUnavailable) as ping_error:
        await unreachable_store.ping()
    with pytest.raises(StoreUnavailable) as op_error:
        await unreachable_store.get_or_create_conversation_id("alice", "s1")
    with pytest.raises(StoreUnavailable):
        await unreachable_store.list_messages("00000000-0000-0000-0000-000000000001")

    for error in (ping_error.value, op_error.value):
        assert "unavailable" in error.message and "127.0.0.1" in error.message
        assert SECRET not in error.message
        assert isinstance(error.__cause__, OSError | asyncpg.InterfaceError | asyncpg.PostgresError)


async def test_a_dsn_that_is_not_postgres_is_rejected_at_open() -> None:
    with pytest.raises(ValueError, match="postgres"):
        await PostgresConversationStore.open(f"mysql://root:{SECRET}@localhost/db")


@pytest.mark.postgres
async def test_store_recovers_when_the_server_comes_back_without_a_restart(
    isolated_postgres_dsn: str,
) -> None:
    real = urlsplit(isolated_postgres_dsn)
    forwarder = TcpForwarder(closed_port(), real.hostname or "127.0.0.1", real.port or 5432)
    store = await PostgresConversationStore.open(
        _via_port(isolated_postgres_dsn, forwarder.port), min_size=1, max_size=2, connect_timeout=2
    )
    try:
        assert store.ready is False
        with pytest.raises(StoreUnavailable):
            await store.get_or_create_conversation_id("alice", "s1")

        await forwarder.start()  # "Postgres is back"
        conversation = await store.get_or_create_conversation_id("alice", "s1")
        assert store.ready is True

        await forwarder.stop()  # "Postgres goes down" under a live pool
        with pytest.raises(StoreUnavailable):
            await store.list_messages(conversation)

        await forwarder.start()
        await store.ping()
        assert await store.get_or_create_conversation_id("alice", "s1") == conversation
    finally:
        await store.close()
        await forwarder.stop()


@pytest.mark.postgres
async def test_concurrent_opens_apply_the_schema_once(isolated_postgres_dsn: str) -> None:
    stores = await asyncio.gather(*(PostgresConversationStore.open(isolated_postgres_dsn) for _ in range(8)))
    try:
        assert all(store.ready for store in stores)
        ids = await asyncio.gather(*(s.get_or_create_conversation_id("alice", "s1") for s in stores))
        assert len(set(ids)) == 1
        first_applied = await _schema_versions(isolated_postgres_dsn)
        assert [version for version, _ in first_applied] == [1, 2, 3]

        again = await PostgresConversationStore.open(isolated_postgres_dsn)  # re-running is a no-op
        await again.close()
        assert await _schema_versions(isolated_postgres_dsn) == first_applied
        tables = await _tables(isolated_postgres_dsn)
        assert tables == ["conversations", "feedback", "messages", "schema_version"]
    finally:
        for store in stores:
            await store.close()


@pytest.mark.postgres
async def test_the_schema_file_is_safe_to_run_twice_in_one_transaction(isolated_postgres_dsn: str) -> None:
    sql = (Path(__file__).parents[2] / "scripts" / "db" / "init_chat_history.sql").read_text(encoding="utf-8")
    conn = await asyncpg.connect(isolated_postgres_dsn)
    try:
        async with conn.transaction():
            await conn.execute(sql)
            await conn.execute(sql)
        assert await conn.fetchval("SELECT count(*) FROM schema_version") == 3
    finally:
        await conn.close()


async def _schema_versions(dsn: str) -> list[tuple[int, object]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT version, applied_at FROM schema_version ORDER BY version")
    finally:
        await conn.close()
    return [(row["version"], row["applied_at"]) for row in rows]


async def _tables(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        )
    finally:
        await conn.close()
    return [str(row["table_name"]) for row in rows]


@pytest.mark.postgres
async def test_text_postgres_cannot_hold_is_bad_input_not_an_outage(isolated_postgres_dsn: str) -> None:
    store = await PostgresConversationStore.open(isolated_postgres_dsn)
    try:
        conversation = await store.get_or_create_conversation_id("alice", "s1")
        with pytest.raises(InvalidRequest, match="cannot hold this text"):
            await store.append_message(conversation, NewMessage(Role.USER, "before\x00after"))
        assert store.ready  # the store still works
        stored = await store.append_message(conversation, NewMessage(Role.USER, "plain"))
        assert [m.id for m in await store.list_messages(conversation)] == [stored.id]
    finally:
        await store.close()
