"""One contract for every ConversationStore adapter (SPEC §6): memory, SQLite and Postgres."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite
import asyncpg
import pytest

from backend.application.ports.conversation_store import ConversationStore
from backend.domain.conversation import Citation, FeedbackRecord, NewMessage, Role, StartedTurn, StoredMessage
from backend.domain.errors import InvalidRequest, NotFound, QuestionCleared, StoreUnavailable
from backend.infrastructure.persistence.memory import InMemoryConversationStore
from backend.infrastructure.persistence.postgres import PostgresConversationStore
from backend.infrastructure.persistence.sqlite import SqliteConversationStore

Opener = Callable[[], Awaitable[ConversationStore]]
_COUNT_SQLITE = "SELECT count(*) FROM conversations WHERE user_id = ? AND session_id = ?"
_COUNT_POSTGRES = "SELECT count(*) FROM conversations WHERE user_id = $1 AND session_id = $2"
Counter = Callable[[str, str], Awaitable[int]]


@dataclass
class Backing:
    """Where an adapter keeps its data; `open()` gives a new store instance on that same data."""

    kind: str
    opener: Opener
    counter: Counter
    opened: list[ConversationStore] = field(default_factory=list)

    async def open(self) -> ConversationStore:
        store = await self.opener()
        self.opened.append(store)
        return store

    async def count_conversations(self, user_id: str, session_id: str) -> int:
        return await self.counter(user_id, session_id)

    async def close_all(self) -> None:
        for store in self.opened:
            await store.close()  # type: ignore[attr-defined]  # every adapter has close(); the port does not


def _memory_backing() -> Backing:
    backing = Backing("memory", InMemoryConversationStore.open, _never_called)

    async def count(user_id: str, session_id: str) -> int:
        # The memory store has no SQL to ask: count its records (test-only peek at private state).
        stores = [s for s in backing.opened if isinstance(s, InMemoryConversationStore)]
        return sum(
            1 for s in stores for c in s._conversations.values() if (c.user_id, c.session_id) == (user_id, session_id)
        )

    backing.counter = count
    return backing


def _sqlite_backing(path: Path) -> Backing:
    async def count(user_id: str, session_id: str) -> int:
        async with aiosqlite.connect(path) as db:
            rows = list(await db.execute_fetchall(_COUNT_SQLITE, (user_id, session_id)))
        return int(rows[0][0])

    return Backing("sqlite", lambda: SqliteConversationStore.open(path), count)


def _postgres_backing(dsn: str) -> Backing:
    async def count(user_id: str, session_id: str) -> int:
        conn = await asyncpg.connect(dsn)
        try:
            value = await conn.fetchval(_COUNT_POSTGRES, user_id, session_id)
        finally:
            await conn.close()
        return int(value)

    return Backing("postgres", lambda: PostgresConversationStore.open(dsn, max_size=10), count)


async def _never_called(user_id: str, session_id: str) -> int:
    raise AssertionError("replaced in _memory_backing")


ALL_ADAPTERS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
DURABLE_ADAPTERS = ALL_ADAPTERS[1:]


def _backing_for(request: pytest.FixtureRequest, tmp_path: Path) -> Backing:
    kind = request.param
    if kind == "memory":
        return _memory_backing()
    if kind == "sqlite":
        return _sqlite_backing(tmp_path / "nested" / "data" / "history.sqlite3")  # parents do not exist yet
    return _postgres_backing(request.getfixturevalue("isolated_postgres_dsn"))


# Sync fixtures pick the backing (getfixturevalue cannot run an async fixture from inside a running loop).
@pytest.fixture(params=ALL_ADAPTERS)
def any_backing(request: pytest.FixtureRequest, tmp_path: Path) -> Backing:
    return _backing_for(request, tmp_path)


@pytest.fixture(params=DURABLE_ADAPTERS)
def durable_backing(request: pytest.FixtureRequest, tmp_path: Path) -> Backing:
    return _backing_for(request, tmp_path)


@pytest.fixture
async def backing(any_backing: Backing) -> AsyncIterator[Backing]:
    yield any_backing
    await any_backing.close_all()


@pytest.fixture
async def durable(durable_backing: Backing) -> AsyncIterator[Backing]:
    yield durable_backing
    await durable_backing.close_all()


@pytest.fixture
async def store(backing: Backing) -> ConversationStore:
    return await backing.open()


def _user(text: str, request_id: str | None = None) -> NewMessage:
    return NewMessage(role=Role.USER, content=text, request_id=request_id)


async def _conversation(store: ConversationStore, user: str = "alice", session: str = "s1") -> str:
    return await store.get_or_create_conversation_id(user, session)


async def _append_many(store: ConversationStore, conversation_id: str, count: int) -> list[StoredMessage]:
    return [await store.append_message(conversation_id, _user(f"m{i}")) for i in range(count)]


# --- conversations -----------------------------------------------------------------------------------


async def test_get_or_create_returns_the_same_id_and_find_sees_it(store: ConversationStore) -> None:
    first = await _conversation(store)
    second = await _conversation(store)

    assert first == second
    assert str(uuid.UUID(first)) == first  # canonical uuid text
    assert await store.find_conversation_id("alice", "s1") == first


async def test_find_unknown_conversation_is_none(store: ConversationStore) -> None:
    await _conversation(store, "alice", "s1")

    assert await store.find_conversation_id("alice", "other-session") is None
    assert await store.find_conversation_id("bob", "s1") is None


async def test_concurrent_first_calls_create_exactly_one_conversation(backing: Backing) -> None:
    store = await backing.open()

    ids = await asyncio.gather(*(store.get_or_create_conversation_id("alice", "race") for _ in range(50)))

    assert len(set(ids)) == 1
    assert await backing.count_conversations("alice", "race") == 1


async def test_concurrent_first_calls_from_several_stores_create_one_conversation(durable: Backing) -> None:
    # Several stores on one database stand for several server processes.
    stores = [await durable.open() for _ in range(5)]

    ids = await asyncio.gather(
        *(s.get_or_create_conversation_id("alice", "multi-process") for s in stores for _ in range(10))
    )

    assert len(set(ids)) == 1
    assert await durable.count_conversations("alice", "multi-process") == 1


async def test_same_session_id_for_two_users_is_two_conversations(store: ConversationStore) -> None:
    alice = await _conversation(store, "alice", "shared")
    bob = await _conversation(store, "bob", "shared")
    await store.append_message(alice, _user("alice's secret"))

    assert alice != bob
    assert await store.list_messages(bob) == []
    assert [m.content for m in await store.list_messages(alice)] == ["alice's secret"]


# --- a turn's start -------------------------------------------------------------------------------------


async def test_start_turn_creates_the_conversation_and_stores_the_message(store: ConversationStore) -> None:
    started = await store.start_turn("alice", "fresh", _user("first question", request_id="r1"), history_limit=10)

    assert started.earlier == ()
    assert started.message.content == "first question" and started.message.role is Role.USER
    assert started.message.conversation_id == started.conversation_id
    assert await store.find_conversation_id("alice", "fresh") == started.conversation_id
    assert [m.id for m in await store.list_messages(started.conversation_id)] == [started.message.id]


async def test_start_turn_returns_the_newest_earlier_messages_oldest_first(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    stored = await _append_many(store, conversation, 5)

    started = await store.start_turn("alice", "s1", _user("next", request_id="r-next"), history_limit=3)

    assert started.conversation_id == conversation
    assert [m.id for m in started.earlier] == [m.id for m in stored[-3:]]
    assert [m.id for m in await store.list_messages(conversation)] == [*(m.id for m in stored), started.message.id]


async def test_start_turn_without_history_reads_none(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    await _append_many(store, conversation, 2)

    started = await store.start_turn("alice", "s1", _user("next"), history_limit=0)

    assert started.earlier == ()
    assert len(await store.list_messages(conversation)) == 3


async def test_a_retried_turn_stores_its_message_once_and_is_not_its_own_history(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    before = await store.append_message(conversation, _user("earlier"))
    first = await store.start_turn("alice", "s1", _user("question", request_id="req-1"), history_limit=5)
    answer = await store.append_message(conversation, NewMessage(Role.ASSISTANT, "answer", request_id="req-1"))

    again = await store.start_turn("alice", "s1", _user("question", request_id="req-1"), history_limit=5)

    assert again.message == first.message
    assert [m.id for m in again.earlier] == [before.id, answer.id]
    assert len(await store.list_messages(conversation)) == 3


async def test_concurrent_first_turns_of_one_session_share_one_conversation(backing: Backing) -> None:
    store = await backing.open()

    turns = await asyncio.gather(
        *(store.start_turn("alice", "race-turns", _user(f"q{i}", request_id=f"r{i}"), 50) for i in range(30))
    )

    assert len({turn.conversation_id for turn in turns}) == 1
    assert await backing.count_conversations("alice", "race-turns") == 1
    stored = await store.list_messages(turns[0].conversation_id)
    assert sorted(m.content for m in stored) == sorted(f"q{i}" for i in range(30))
    # Each turn saw only messages stored before its own, in the order they were stored (a turn still in
    # flight when another started may be missing from that one's history: neither had been answered).
    order = [m.id for m in stored]
    for turn in turns:
        earlier = [m.id for m in turn.earlier]
        before = order[: order.index(turn.message.id)]
        assert earlier == [m for m in before if m in earlier]


# --- messages ------------------------------------------------------------------------------------------


async def test_messages_come_back_oldest_first_after_a_tight_loop(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    appended = await _append_many(store, conversation, 60)
    listed = await store.list_messages(conversation)

    assert [m.content for m in listed] == [f"m{i}" for i in range(60)]
    assert [m.id for m in listed] == [m.id for m in appended]
    assert len({m.id for m in listed}) == 60
    assert all(a.created_at <= b.created_at for a, b in itertools.pairwise(listed))


async def test_user_and_assistant_turns_interleave_in_order(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    expected = [(role, f"{role.value}-{turn}") for turn in range(5) for role in (Role.USER, Role.ASSISTANT)]
    for role, text in expected:
        await store.append_message(conversation, NewMessage(role, text, request_id=f"r{text[-1]}"))

    listed = await store.list_messages(conversation)

    assert [(m.role, m.content) for m in listed] == expected


async def test_limit_returns_the_newest_messages_oldest_first(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    await _append_many(store, conversation, 10)

    newest = await store.list_messages(conversation, limit=3)

    assert [m.content for m in newest] == ["m7", "m8", "m9"]
    assert await store.list_messages(conversation, limit=0) == []
    assert len(await store.list_messages(conversation, limit=100)) == 10


async def test_before_cursor_pages_backwards_through_history(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    await _append_many(store, conversation, 10)

    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(conversation, limit=4, before=cursor)
        if not page:
            break
        pages.append([m.content for m in page])
        cursor = page[0].id

    assert pages == [["m6", "m7", "m8", "m9"], ["m2", "m3", "m4", "m5"], ["m0", "m1"]]


async def test_before_without_limit_returns_everything_older(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    appended = await _append_many(store, conversation, 5)

    older = await store.list_messages(conversation, before=appended[3].id)

    assert [m.content for m in older] == ["m0", "m1", "m2"]
    assert await store.list_messages(conversation, before=appended[0].id) == []


async def test_before_must_be_a_message_of_that_conversation(store: ConversationStore) -> None:
    mine = await _conversation(store, "alice", "s1")
    other = await _conversation(store, "alice", "s2")
    await _append_many(store, mine, 2)
    foreign = await store.append_message(other, _user("elsewhere"))

    with pytest.raises(NotFound):
        await store.list_messages(mine, before=foreign.id)
    with pytest.raises(NotFound):
        await store.list_messages(mine, before=str(uuid.uuid4()))
    with pytest.raises(NotFound):
        await store.list_messages(mine, before="not-a-uuid")


async def test_negative_limit_is_invalid(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    with pytest.raises(InvalidRequest):
        await store.list_messages(conversation, limit=-1)


async def test_append_with_the_same_request_id_is_stored_once(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    first = await store.append_message(conversation, _user("hello", request_id="req-1"))
    again = await store.append_message(conversation, _user("hello", request_id="req-1"))
    answer = await store.append_message(conversation, NewMessage(Role.ASSISTANT, "hi", request_id="req-1"))

    assert again == first
    assert answer.id != first.id  # the key is (conversation, request, role)
    assert [m.id for m in await store.list_messages(conversation)] == [first.id, answer.id]


async def test_concurrent_retries_of_one_request_store_one_message(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    results = await asyncio.gather(
        *(store.append_message(conversation, _user("once", request_id="req-race")) for _ in range(20))
    )

    assert len({m.id for m in results}) == 1
    assert len(await store.list_messages(conversation)) == 1


async def test_messages_without_request_id_are_never_deduplicated(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    await store.append_message(conversation, _user("same"))
    await store.append_message(conversation, _user("same"))

    assert [m.content for m in await store.list_messages(conversation)] == ["same", "same"]


async def test_cited_and_consulted_sources_debug_and_flags_round_trip(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    citations = (
        Citation(id="1", title="Guide — 第一章", doc_id="doc-a", chunk_id="doc-a#3", snippet='said "yes"'),
        Citation(id="2", title="Notes", doc_id="doc-b", chunk_id="doc-b#0", snippet=""),
    )
    consulted = (Citation(id="3", title="Other", doc_id="doc-c", chunk_id="doc-c#1", snippet="not cited"),)
    debug = {"route": {"kb": "docs", "confidence": 0.9}, "steps": [1, 2, {"ok": True}], "note": None}
    message = NewMessage(
        Role.ASSISTANT,
        "answer [1][2]",
        citations=citations,
        consulted=consulted,
        debug=debug,
        completed=False,
        request_id="req-9",
    )

    stored = await store.append_message(conversation, message)
    [listed] = await store.list_messages(conversation)

    for got in (stored, listed):
        assert (got.citations, got.consulted) == (citations, consulted)
        assert all(isinstance(c, Citation) for c in got.citations + got.consulted)
        assert got.debug == debug
        assert got.completed is False
        assert got.role is Role.ASSISTANT
        assert got.request_id == "req-9"
        assert got.conversation_id == conversation
        assert got.created_at.tzinfo is not None
    assert listed == stored


async def test_plain_message_has_no_citations_and_no_debug(store: ConversationStore) -> None:
    conversation = await _conversation(store)

    stored = await store.append_message(conversation, NewMessage(Role.SYSTEM, "be brief"))
    [listed] = await store.list_messages(conversation)

    assert (listed.citations, listed.consulted, listed.debug, listed.completed) == ((), (), None, True)
    assert listed.request_id is None
    assert listed.role is Role.SYSTEM
    assert listed == stored


async def test_append_to_unknown_or_malformed_conversation_is_not_found(store: ConversationStore) -> None:
    with pytest.raises(NotFound):
        await store.append_message(str(uuid.uuid4()), _user("lost"))
    with pytest.raises(NotFound):
        await store.append_message("1; DROP TABLE messages", _user("lost"))


async def test_unknown_conversation_has_no_messages_and_malformed_ids_are_not_found(
    store: ConversationStore,
) -> None:
    unknown = str(uuid.uuid4())

    assert await store.list_messages(unknown) == []
    assert await store.clear_messages(unknown) == 0
    with pytest.raises(NotFound):
        await store.list_messages("nope")
    with pytest.raises(NotFound):
        await store.clear_messages("nope")


# --- clear -----------------------------------------------------------------------------------------------


async def test_clear_returns_the_count_and_touches_only_that_conversation(store: ConversationStore) -> None:
    mine = await _conversation(store, "alice", "s1")
    other = await _conversation(store, "alice", "s2")
    await _append_many(store, mine, 4)
    await _append_many(store, other, 2)

    assert await store.clear_messages(mine) == 4
    assert await store.list_messages(mine) == []
    assert [m.content for m in await store.list_messages(other)] == ["m0", "m1"]
    assert await store.clear_messages(mine) == 0


async def test_a_cleared_conversation_keeps_its_id_and_accepts_new_messages(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    await _append_many(store, conversation, 2)
    await store.clear_messages(conversation)

    again = await _conversation(store)
    fresh = await store.append_message(again, _user("after clear"))

    assert again == conversation
    assert await store.list_messages(conversation) == [fresh]


def _answer(question: StoredMessage, text: str = "the answer") -> NewMessage:
    return NewMessage(Role.ASSISTANT, text, request_id=question.request_id, reply_to=question.id)


async def test_an_answer_to_a_cleared_question_is_refused_and_nothing_is_stored(store: ConversationStore) -> None:
    turn = await store.start_turn("alice", "s1", _user("question", request_id="r1"), history_limit=0)
    await store.clear_messages(turn.conversation_id)

    with pytest.raises(QuestionCleared):
        await store.append_message(turn.conversation_id, _answer(turn.message))

    assert await store.list_messages(turn.conversation_id) == []


async def test_an_answer_goes_with_its_question_and_its_feedback_with_it(store: ConversationStore) -> None:
    turn = await store.start_turn("alice", "s1", _user("question", request_id="r1"), history_limit=0)
    answer = await store.append_message(turn.conversation_id, _answer(turn.message))
    await store.add_feedback("alice", FeedbackRecord(message_id=answer.id, is_positive=True))

    assert await store.clear_messages(turn.conversation_id) == 2
    with pytest.raises(NotFound):
        await store.add_feedback("alice", FeedbackRecord(message_id=answer.id, is_positive=False))
    assert await store.list_messages(turn.conversation_id) == []


async def _answer_unless_cleared(store: ConversationStore, turn: StartedTurn) -> None:
    with contextlib.suppress(QuestionCleared):
        await store.append_message(turn.conversation_id, _answer(turn.message))


async def test_clears_racing_answers_leave_no_answer_without_its_question(store: ConversationStore) -> None:
    """Turns in flight while the conversation is cleared: every answer that stays has its question."""
    for round_ in range(3):
        turns = [
            await store.start_turn("alice", "s1", _user(f"q{round_}-{i}", request_id=f"r{round_}-{i}"), history_limit=0)
            for i in range(30)
        ]
        conversation = turns[0].conversation_id

        work = [_answer_unless_cleared(store, turn) for turn in turns]
        work += [store.clear_messages(conversation) for _ in range(10)]
        random.Random(round_).shuffle(work)
        await asyncio.gather(*work)

        messages = await store.list_messages(conversation)
        questions = {m.request_id for m in messages if m.role is Role.USER}
        answers = {m.request_id for m in messages if m.role is Role.ASSISTANT}
        assert answers <= questions, f"answers without their question: {sorted(answers - questions)}"


# --- feedback ---------------------------------------------------------------------------------------------


async def test_feedback_on_own_message_is_stored(store: ConversationStore) -> None:
    conversation = await _conversation(store, "alice")
    answer = await store.append_message(conversation, NewMessage(Role.ASSISTANT, "42"))

    first = await store.add_feedback(
        "alice",
        FeedbackRecord(
            answer.id,
            True,
            query="q",
            thread_id="s1",
            agent_type="graph_agent",
            metadata={"reason": "good", "tags": ["a"]},
        ),
    )
    second = await store.add_feedback("alice", FeedbackRecord(answer.id, False))

    assert first and second and first != second
    assert str(uuid.UUID(first)) == first


async def test_feedback_on_another_users_message_is_not_found(store: ConversationStore) -> None:
    alice = await _conversation(store, "alice", "shared")
    await _conversation(store, "bob", "shared")
    answer = await store.append_message(alice, NewMessage(Role.ASSISTANT, "alice's answer"))

    with pytest.raises(NotFound):
        await store.add_feedback("bob", FeedbackRecord(answer.id, False))
    assert await store.add_feedback("alice", FeedbackRecord(answer.id, True))  # the message itself exists


@pytest.mark.parametrize("message_id", [str(uuid.uuid4()), "not-a-uuid", "", "' OR '1'='1"])
async def test_feedback_on_unknown_or_malformed_message_is_not_found(store: ConversationStore, message_id: str) -> None:
    await store.append_message(await _conversation(store), _user("exists"))

    with pytest.raises(NotFound):
        await store.add_feedback("alice", FeedbackRecord(message_id, True))


async def test_feedback_on_a_cleared_message_is_not_found(store: ConversationStore) -> None:
    conversation = await _conversation(store)
    answer = await store.append_message(conversation, NewMessage(Role.ASSISTANT, "gone soon"))
    await store.add_feedback("alice", FeedbackRecord(answer.id, True))

    assert await store.clear_messages(conversation) == 1  # feedback rows go with their message
    with pytest.raises(NotFound):
        await store.add_feedback("alice", FeedbackRecord(answer.id, True))


# --- lifecycle ---------------------------------------------------------------------------------------------


async def test_ping_answers_until_closed(backing: Backing) -> None:
    store = await backing.open()
    await store.ping()

    await store.close()  # type: ignore[attr-defined]

    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.get_or_create_conversation_id("alice", "s1")


async def test_history_survives_closing_and_reopening(durable: Backing) -> None:
    store = await durable.open()
    conversation = await _conversation(store)
    citation = Citation(id="1", title="T", doc_id="d", chunk_id="d#1", snippet="s")
    written = [
        await store.append_message(conversation, _user("question", request_id="r1")),
        await store.append_message(
            conversation, NewMessage(Role.ASSISTANT, "answer", citations=(citation,), request_id="r1")
        ),
    ]
    await store.close()  # type: ignore[attr-defined]

    reopened = await durable.open()

    assert await reopened.find_conversation_id("alice", "s1") == conversation
    assert await reopened.list_messages(conversation) == written
    # The idempotency key survives too: a retry after a restart is not a duplicate.
    assert await reopened.append_message(conversation, _user("question", request_id="r1")) == written[0]
    assert len(await reopened.list_messages(conversation)) == 2
