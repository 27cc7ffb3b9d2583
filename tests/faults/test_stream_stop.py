"""`StreamHandler.stop_streams()`, what the serving process calls when its shutdown grace period is over, in
process with fakes: where the stream is when it is stopped decides how it is interrupted, never what the client
and the store end up with."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from backend.application.chat.inputs import ChatInput
from backend.application.chat.stream_handler import SHUTDOWN_CODE, SHUTDOWN_MESSAGE
from backend.domain.context import RequestContext
from backend.domain.conversation import StoredMessage
from backend.domain.errors import ShuttingDown
from backend.domain.events import DoneEvent, ErrorEvent, ProgressEvent, Stage, StreamEvent, TokenEvent
from backend.server.errors import status_for
from tests.faults.helpers import poll
from tests.support.fakes import FakeAgent, FakeChatModel, evidence
from tests.support.wiring import Wired, wire

FACTS = [evidence("chunk:1", "The orchard was founded in 1952 by Ada Fenwick.", 0.9, "History")]
DELTAS = tuple(f"t{i} " for i in range(50))


def _wired(delay_s: float = 0.05) -> tuple[Wired, FakeChatModel]:
    model = FakeChatModel(deltas=DELTAS, delay_s=delay_s)
    return wire(FakeAgent(results=FACTS), model), model


async def _start(wired: Wired, session: str = "s1") -> tuple[asyncio.Task[None], list[StreamEvent]]:
    turn = await wired.stream.prepare(
        RequestContext(f"req-{session}", "alice", session),
        ChatInput(session_id=session, message="When was the orchard founded?", kb_prefix="orchard"),
    )
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in wired.stream.events(turn):
            seen.append(event)

    return asyncio.create_task(consume()), seen


async def _until(condition: Callable[[], bool]) -> None:
    async def check() -> bool | None:
        return condition() or None

    await poll(check, 5, "the stream did not get there", interval_s=0.001)


async def _stored(wired: Wired, session: str = "s1") -> list[StoredMessage]:
    conversation = await wired.store.find_conversation_id("alice", session)
    assert conversation is not None
    return await wired.store.list_messages(conversation)


def _tokens(seen: list[StreamEvent]) -> str:
    return "".join(event.text for event in seen if isinstance(event, TokenEvent))


async def _assert_ended_by_shutdown(wired: Wired, seen: list[StreamEvent]) -> None:
    assert isinstance(seen[-2], ErrorEvent) and isinstance(seen[-1], DoneEvent)
    assert (seen[-2].message, seen[-2].code) == (SHUTDOWN_MESSAGE, SHUTDOWN_CODE)
    messages = await _stored(wired)
    assert len(messages) == 2
    assert (messages[1].content, messages[1].completed) == (_tokens(seen), False)
    assert messages[1].debug is not None and messages[1].debug["error"] == SHUTDOWN_MESSAGE
    assert seen[-1].message_id == messages[1].id
    assert wired.stream.active_streams == 0 and wired.stream.pending_saves == 0


async def test_a_stream_waiting_for_the_model_is_interrupted_at_once() -> None:
    wired, model = _wired(delay_s=10)  # the model's next delta would take 10 s
    task, seen = await _start(wired)
    await _until(lambda: wired.stream.active_streams == 1 and len(model.prompts) == 1)

    assert wired.stream.stop_streams() == 1
    async with asyncio.timeout(1):
        await task  # ends normally: the interruption was taken back, not left to cancel the response

    assert not task.cancelled() and task.cancelling() == 0
    assert model.closed_streams == 1
    await _assert_ended_by_shutdown(wired, seen)


async def test_a_stream_whose_event_is_being_sent_stops_before_the_next_one() -> None:
    wired, _ = _wired(delay_s=0.001)
    turn = await wired.stream.prepare(
        RequestContext("req-s1", "alice", "s1"),
        ChatInput(session_id="s1", message="When was the orchard founded?", kb_prefix="orchard"),
    )
    seen: list[StreamEvent] = []
    stopped = 0
    async for event in wired.stream.events(turn):  # this consumer stops the streams while it holds an event
        seen.append(event)
        if isinstance(event, TokenEvent) and len(_tokens(seen).split()) == 3:
            stopped = wired.stream.stop_streams()

    assert stopped == 1
    assert _tokens(seen) == "t0 t1 t2 "  # not one more delta was asked for
    await _assert_ended_by_shutdown(wired, seen)


async def test_the_client_leaving_at_the_same_time_still_cancels_the_stream() -> None:
    wired, _ = _wired(delay_s=10)
    task, seen = await _start(wired)
    await _until(lambda: any(isinstance(event, ProgressEvent) and event.stage is Stage.GENERATION for event in seen))

    wired.stream.stop_streams()
    task.cancel()  # what the server does when the client goes away
    with pytest.raises(asyncio.CancelledError):
        await task

    await wired.saver.drain()
    messages = await _stored(wired)
    assert len(messages) == 2 and messages[1].completed is False  # the partial answer, once
    assert not any(isinstance(event, DoneEvent) for event in seen)


async def test_streams_opened_after_the_stop_end_at_once_without_calling_the_model() -> None:
    wired, model = _wired()
    assert wired.stream.stop_streams() == 0
    task, seen = await _start(wired)
    async with asyncio.timeout(1):
        await task

    assert [event.kind.value for event in seen] == ["start", "error", "done"]
    assert model.prompts == []
    await _assert_ended_by_shutdown(wired, seen)


async def test_a_turn_that_is_not_streamed_is_stopped_too_and_raises_a_shutting_down_error() -> None:
    # `/api/v1/chat` and the OpenAI facade without `stream` collect the same stream: they answer 503 at the end of
    # the grace period, with the partial answer stored, rather than being cut off by the server's last timeout.
    wired, model = _wired(delay_s=0.05)
    task = asyncio.create_task(
        wired.chat.handle(
            RequestContext("req-s1", "alice", "s1"),
            ChatInput(session_id="s1", message="When was the orchard founded?", kb_prefix="orchard"),
        )
    )
    await _until(lambda: wired.stream.active_streams == 1 and len(model.prompts) == 1)

    assert wired.stream.stop_streams() == 1
    with pytest.raises(ShuttingDown) as raised:
        async with asyncio.timeout(1):
            await task

    assert (raised.value.public_message, raised.value.code) == (SHUTDOWN_MESSAGE, SHUTDOWN_CODE)
    assert status_for(raised.value) == 503
    messages = await _stored(wired)
    assert len(messages) == 2 and messages[1].completed is False
    assert messages[1].debug is not None and messages[1].debug["error"] == SHUTDOWN_MESSAGE
    assert wired.stream.active_streams == 0 and wired.stream.pending_saves == 0
