"""ChatInput.history: turns the caller supplies replace the stored history for generation, and the turn is
still stored. The REST path (no history given) keeps using the stored conversation."""

from __future__ import annotations

import pytest

from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import TurnLimits, TurnService
from backend.domain.context import RequestContext
from backend.domain.conversation import Message, Role
from backend.domain.errors import InvalidRequest
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from tests.support.fakes import FakeAgent, FakeChatModel
from tests.support.wiring import DEFAULT_KBS, wire

GIVEN = (Message(Role.USER, "What grows there?"), Message(Role.ASSISTANT, "Apples, as the client recalls."))


def ctx(request_id: str) -> RequestContext:
    return RequestContext(request_id, "alice", "s1")


def general(message: str, history: tuple[Message, ...] | None = None) -> ChatInput:
    return ChatInput(session_id="s1", message=message, kb_prefix="general", history=history)


def prompt_turns(model: FakeChatModel, call: int) -> list[tuple[str, str]]:
    return [(turn.role, turn.content) for turn in model.prompts[call]][1:]  # without the system prompt


async def test_given_history_replaces_the_stored_one_for_the_model_and_the_turn_is_stored() -> None:
    model = FakeChatModel(deltas=("stored", " answer"))
    wired = wire(FakeAgent(), model)
    await wired.chat.handle(ctx("r1"), general("first question"))
    turn = await wired.stream.prepare(ctx("r2"), general("second question", history=GIVEN))
    assert turn.history == GIVEN
    [event async for event in wired.stream.events(turn)]
    assert prompt_turns(model, 1) == [
        ("user", "What grows there?"),
        ("assistant", "Apples, as the client recalls."),
        ("user", "second question"),
    ]
    conversation = await wired.store.find_conversation_id("alice", "s1")
    assert conversation is not None
    stored = await wired.store.list_messages(conversation)
    assert [(m.role, m.content) for m in stored] == [
        (Role.USER, "first question"),
        (Role.ASSISTANT, "stored answer"),
        (Role.USER, "second question"),
        (Role.ASSISTANT, "stored answer"),
    ]


async def test_without_given_history_the_stored_conversation_is_used() -> None:
    model = FakeChatModel(deltas=("stored answer",))
    wired = wire(FakeAgent(), model)
    await wired.chat.handle(ctx("r1"), general("first question"))
    await wired.chat.handle(ctx("r2"), general("second question"))
    assert prompt_turns(model, 1) == [
        ("user", "first question"),
        ("assistant", "stored answer"),
        ("user", "second question"),
    ]


async def test_an_empty_given_history_means_no_history_even_when_one_is_stored() -> None:
    model = FakeChatModel(deltas=("stored answer",))
    wired = wire(FakeAgent(), model)
    await wired.chat.handle(ctx("r1"), general("first question"))
    await wired.chat.handle(ctx("r2"), general("a fresh start", history=()))
    assert prompt_turns(model, 1) == [("user", "a fresh start")]


async def test_given_history_keeps_the_history_limit_and_drops_empty_turns() -> None:
    store = InMemoryConversationStore()
    turns = TurnService(store, static_catalog(DEFAULT_KBS), {"naive_rag_agent"}, TurnLimits(history_max_messages=2))
    given = (
        Message(Role.USER, "one"),
        Message(Role.ASSISTANT, "two"),
        Message(Role.USER, "three"),
        Message(Role.ASSISTANT, ""),
    )
    turn = await turns.prepare(ctx("r1"), general("four", history=given))
    assert turn.history == (Message(Role.ASSISTANT, "two"), Message(Role.USER, "three"))
    none = TurnService(store, static_catalog(DEFAULT_KBS), {"naive_rag_agent"}, TurnLimits(history_max_messages=0))
    assert (await none.prepare(ctx("r2"), general("five", history=given))).history == ()


async def test_system_turns_in_a_given_history_are_refused_before_anything_is_stored() -> None:
    wired = wire(FakeAgent(), FakeChatModel())
    with pytest.raises(InvalidRequest, match="user and assistant"):
        await wired.chat.handle(ctx("r1"), general("q", history=(Message(Role.SYSTEM, "be terse"),)))
    assert await wired.store.find_conversation_id("alice", "s1") is None
