"""The streaming use case: exact event order, history writes, errors and disconnects."""

import asyncio
from contextlib import aclosing

import pytest

from backend.application.chat.debug_middleware import DebugMiddleware
from backend.application.chat.inputs import ChatInput
from backend.application.chat.pipeline import EventPipeline
from backend.application.chat.stream_handler import INTERNAL_ERROR_MESSAGE
from backend.application.ports.chat_model import ModelDelta
from backend.domain.context import RequestContext
from backend.domain.conversation import Role
from backend.domain.debug import DebugLevel
from backend.domain.errors import (
    AgentUnavailable,
    AnswerNotSaved,
    ConversationStoreUnavailable,
    GraphRagError,
    InvalidRequest,
    InvalidWorkerName,
    ModelError,
    QuestionCleared,
    UnknownAgentType,
    UnknownKnowledgeBase,
)
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ProgressEvent,
    StreamEvent,
    TokenEvent,
)
from backend.domain.generation import GenerationMode
from backend.domain.tokens import TokenUsage, estimate_tokens
from backend.infrastructure.llm.accounted_model import AccountedChatModel
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from backend.server.errors import status_for
from tests.support.fakes import FakeAgent, FakeChatModel, evidence
from tests.support.wiring import Wired, wire

ORCHARD_FACTS = [evidence("chunk:1", "The orchard was founded in 1952 by Ada Fenwick.", 0.9, "History")]


def context(request_id: str = "req-1", session: str = "s1", user: str = "alice") -> RequestContext:
    return RequestContext(request_id, user, session)


def question(message: str = "When was the orchard founded?", **kwargs: str) -> ChatInput:
    return ChatInput(
        session_id="s1",
        message=message,
        kb_prefix=kwargs.get("kb", "orchard"),
        agent_type=kwargs.get("agent"),
        worker_name=kwargs.get("worker"),
    )


def label(event: StreamEvent) -> str:
    if isinstance(event, ProgressEvent):
        return f"progress:{event.stage.value}:{event.completed}/{event.total}"
    return event.kind.value


async def collect(wired: Wired, chat_input: ChatInput, ctx: RequestContext | None = None) -> list[StreamEvent]:
    turn = await wired.stream.prepare(ctx or context(), chat_input)
    return [event async for event in wired.stream.events(turn)]


async def stored(wired: Wired, user: str = "alice", session: str = "s1"):  # type: ignore[no-untyped-def]
    conversation = await wired.store.find_conversation_id(user, session)
    assert conversation is not None
    return await wired.store.list_messages(conversation)


async def test_golden_event_sequence_of_a_rag_answer() -> None:
    facts = [*ORCHARD_FACTS, evidence("chunk:2", "Ada Fenwick planted the first trees.", 0.8, "Founders")]
    wired = wire(FakeAgent(results=facts), FakeChatModel(deltas=("Founded", " in", " 1952", " [2].")))
    events = await collect(wired, question())
    assert [label(e) for e in events] == [
        "start",
        "progress:routing:0/1",
        "progress:routing:1/1",
        "routed",  # internal: the SSE protocol leaves it out, AG-UI and the debug middleware use it
        "progress:retrieval:0/1",
        "progress:retrieval:1/1",
        "retrieved",  # internal too
        "sources",  # internal: the numbered sources the answer cites against
        "progress:generation:0/1",
        "token",
        "token",
        "token",
        "token",
        "usage",  # internal: the tokens the answer took, for the OpenAI facade
        "progress:generation:1/1",
        "citations",
        "done",
    ]
    cited = next(e for e in events if isinstance(e, CitationsEvent))
    assert [(c.id, c.title) for c in cited.citations] == [("chunk:2", "Founders")]
    assert [(c.id, c.title) for c in cited.consulted] == [("chunk:1", "History")]
    # The model cited its second source: the answer's first citation, so its marker is [1].
    assert [e.text for e in events if isinstance(e, TokenEvent)] == ["Founded", " in", " 1952", " [1]."]
    messages = await stored(wired)
    assert [(m.role, m.content, m.completed) for m in messages] == [
        (Role.USER, "When was the orchard founded?", True),
        (Role.ASSISTANT, "Founded in 1952 [1].", True),
    ]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message_id == messages[1].id
    assert (messages[1].citations, messages[1].consulted) == (cited.citations, cited.consulted)
    assert messages[1].debug is not None and messages[1].debug["generation_mode"] == "llm"
    assert messages[1].debug["route"]["worker_name"] == "orchard:naive_rag_agent:retrieve_only"


async def test_markers_split_across_model_deltas_are_sent_whole_renumbered_and_stored_as_sent() -> None:
    facts = [evidence(f"chunk:{n}", f"Fact {n}.", 1 - n / 10) for n in range(1, 4)]
    deltas = ("Planted", " [", "3", "]", " and", " sold [1", ", 3]", " then [")
    wired = wire(FakeAgent(results=facts), FakeChatModel(deltas=deltas))
    events = await collect(wired, question())
    tokens = [e.text for e in events if isinstance(e, TokenEvent)]
    # A delta that may only begin a marker goes with the next one; the bracket left open at the end is text.
    assert tokens == ["Planted", " ", "[1]", " and", " sold ", "[2][1]", " then ", "["]
    assert [label(e) for e in events][-5:] == ["token", "usage", "progress:generation:1/1", "citations", "done"]
    cited = next(e for e in events if isinstance(e, CitationsEvent))
    assert ([c.id for c in cited.citations], [c.id for c in cited.consulted]) == (["chunk:3", "chunk:1"], ["chunk:2"])
    answer = (await stored(wired))[1]
    assert answer.content == "".join(tokens) == "Planted [1] and sold [2][1] then ["
    assert (answer.citations, answer.consulted) == (cited.citations, cited.consulted)


async def test_general_chat_uses_the_same_protocol_with_an_empty_plan() -> None:
    agent = FakeAgent(results=ORCHARD_FACTS)
    wired = wire(agent, FakeChatModel(deltas=("Hi", "!")))
    events = await collect(wired, question("hello, how are you?", kb="general"))
    assert [label(e) for e in events] == [
        "start",
        "progress:routing:0/1",
        "progress:routing:1/1",
        "routed",
        "progress:generation:0/1",
        "token",
        "token",
        "usage",
        "progress:generation:1/1",
        "done",
    ]
    assert agent.calls == []


async def test_history_reaches_the_model_and_excludes_the_current_message() -> None:
    model = FakeChatModel(deltas=("ok",))
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model)
    await collect(wired, question("first question about the orchard"), context("r1"))
    await collect(wired, question("second question about the orchard"), context("r2"))
    second_prompt = model.prompts[1]
    contents = [turn.content for turn in second_prompt]
    assert contents[1] == "first question about the orchard"
    assert contents[2] == "ok"
    assert contents[-1].endswith("Question: second question about the orchard")
    assert sum("second question" in c for c in contents) == 1


async def test_model_failure_mid_stream_ends_with_error_then_done_and_a_partial_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), FakeChatModel(deltas=("a", "b", "c", "d"), fail_after=2))
    events = await collect(wired, question())
    assert [label(e) for e in events][-5:] == ["token", "token", "citations", "error", "done"]
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert (error.message, error.code) == (ModelError.public_text, "model_error")
    messages = await stored(wired)
    assert len(messages) == 2
    assert (messages[1].content, messages[1].completed) == ("ab", False)
    assert messages[1].debug is not None and messages[1].debug["error"] == ModelError.public_text
    # The cause is the operator's, in the log line of the request.
    assert any("req-1" in line and "dropped" in line for line in caplog.messages), caplog.messages


async def test_retrieval_failure_is_an_error_event_and_no_model_call() -> None:
    model = FakeChatModel()
    wired = wire(FakeAgent(fail=RuntimeError("store down")), model)
    events = await collect(wired, question())
    assert [label(e) for e in events][-2:] == ["error", "done"]
    assert model.prompts == []
    assert (await stored(wired))[1].completed is False


@pytest.mark.parametrize("stop_after", [1, 3, 8])
async def test_client_closing_the_stream_stores_the_partial_answer_exactly_once(stop_after: int) -> None:
    model = FakeChatModel(deltas=tuple(f"t{i} " for i in range(20)), delay_s=0.001)
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model)
    turn = await wired.stream.prepare(context(), question())
    seen: list[StreamEvent] = []
    async with aclosing(wired.stream.events(turn)) as events:
        async for event in events:
            seen.append(event)
            if len(seen) == stop_after:
                break
    await wired.saver.drain()
    messages = await stored(wired)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT]
    tokens = "".join(e.text for e in seen if isinstance(e, TokenEvent))
    assert messages[1].content == tokens
    assert messages[1].completed is False
    assert model.closed_streams == (
        1 if any(isinstance(e, TokenEvent) or label(e) == "progress:generation:0/1" for e in seen) else 0
    )


async def test_cancelling_the_consumer_task_stores_the_partial_answer_and_leaves_no_task() -> None:
    model = FakeChatModel(deltas=tuple(f"t{i} " for i in range(50)), delay_s=0.01)
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model)
    turn = await wired.stream.prepare(context(), question())
    tokens: list[str] = []
    three_tokens = asyncio.Event()

    async def consume() -> None:
        async for event in wired.stream.events(turn):
            if isinstance(event, TokenEvent):
                tokens.append(event.text)
                if len(tokens) == 3:
                    three_tokens.set()

    task = asyncio.create_task(consume())
    await three_tokens.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wired.saver.drain()
    messages = await stored(wired)
    assert len(messages) == 2
    assert messages[1].content.startswith("".join(tokens[:3]))
    assert messages[1].completed is False
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_user_message_is_stored_before_routing_and_bad_input_stores_nothing() -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), FakeChatModel())
    turn = await wired.stream.prepare(context(), question())
    # Stored already, before a single event was produced.
    assert [m.content for m in await stored(wired)] == ["When was the orchard founded?"]
    await wired.saver.drain()
    del turn
    bad_inputs = [
        (question(kb="nope"), UnknownKnowledgeBase),
        (question(agent="chat_agent"), UnknownAgentType),
        (question(agent="graph_agent"), AgentUnavailable),
        (question(worker="orchard:naive_rag_agent:chat"), InvalidWorkerName),
        (question(worker="a:b:c:d"), InvalidWorkerName),
        (question("   "), InvalidRequest),
        (question("x" * 2001), InvalidRequest),
        (ChatInput(session_id="bad session id!", message="hi"), InvalidRequest),
    ]
    for chat_input, error in bad_inputs:
        with pytest.raises(error):
            await wired.stream.prepare(context(session="s2"), chat_input)
    assert await wired.store.find_conversation_id("alice", "s2") is None
    assert await wired.store.find_conversation_id("alice", "bad session id!") is None


async def test_extractive_mode_without_a_model_streams_a_cited_extractive_answer() -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model=None)
    events = await collect(wired, question())
    text = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert text.startswith("Extractive answer")
    assert "founded in 1952 by Ada Fenwick. [1]" in text
    assert (await stored(wired))[1].debug["generation_mode"] == "extractive"  # type: ignore[index]


async def test_non_streaming_chat_returns_answer_citations_and_route() -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), FakeChatModel(deltas=("Founded in", " 1952 [1].")))
    result = await wired.chat.handle(context(), question())
    assert result.answer == "Founded in 1952 [1]."
    assert [c.id for c in result.citations] == ["chunk:1"]
    assert result.route.worker_name == "orchard:naive_rag_agent:retrieve_only"
    assert result.generation_mode is GenerationMode.LLM and result.debug is None  # no debug asked for
    messages = await stored(wired)
    assert [m.id for m in messages] == [result.user_message_id, result.message_id]
    assert (messages[1].content, messages[1].citations, messages[1].completed) == (
        result.answer,
        result.citations,
        True,
    )


async def test_the_usage_is_what_the_model_reported() -> None:
    model = FakeChatModel(deltas=("Founded in", " 1952 [1]."), usage=TokenUsage(412, 9))
    result = await wire(FakeAgent(results=ORCHARD_FACTS), model).chat.handle(context(), question())
    assert result.usage == TokenUsage(412, 9, counted=False)


async def test_without_a_reported_usage_the_prompt_sent_and_the_answer_are_counted() -> None:
    model = FakeChatModel(deltas=("Founded in", " 1952 [1]."))
    result = await wire(FakeAgent(results=ORCHARD_FACTS), model).chat.handle(context(), question())
    prompt = model.prompts[0]
    assert ORCHARD_FACTS[0].evidence in prompt[-1].content  # the sources were in what the model was sent
    expected = TokenUsage(sum(estimate_tokens(m.content) for m in prompt), estimate_tokens(result.answer), True)
    assert result.usage == expected
    assert expected.prompt_tokens > estimate_tokens(question().message) + estimate_tokens(ORCHARD_FACTS[0].evidence)


async def test_an_extractive_answer_counts_the_question_and_the_sources_it_read() -> None:
    result = await wire(FakeAgent(results=ORCHARD_FACTS), model=None).chat.handle(context(), question())
    read = estimate_tokens(question().message) + estimate_tokens(ORCHARD_FACTS[0].evidence)
    assert result.usage == TokenUsage(read, estimate_tokens(result.answer), counted=True)
    assert result.usage.completion_tokens > 10 and result.usage.total_tokens == read + result.usage.completion_tokens


async def test_non_streaming_chat_with_debug_returns_the_stored_debug_with_its_execution_log() -> None:
    wired = wire(
        FakeAgent(results=ORCHARD_FACTS),
        AccountedChatModel(FakeChatModel(deltas=("Founded", " in 1952."))),
        pipeline=EventPipeline([DebugMiddleware()]),
    )
    ctx = RequestContext("req-1", "alice", "s1", debug_level=DebugLevel.STANDARD)
    result = await wired.chat.handle(ctx, question())
    assert result.debug is not None
    assert result.debug == (await stored(wired))[1].debug  # the same record as the stored answer's
    assert result.debug["debug_level"] == "standard" and result.debug["generation_mode"] == "llm"
    nodes = [entry["node"] for entry in result.debug["execution_log"]]
    assert nodes == ["route", "retrieval:naive_rag_agent", "model_call", "timings"]
    assert result.debug["execution_log"][-1]["output"]["completed"] is True


async def test_non_streaming_model_failure_stores_a_partial_reply_and_raises() -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), FakeChatModel(deltas=("a", "b", "c"), fail_after=2))
    with pytest.raises(ModelError) as raised:
        await wired.chat.handle(context(), question())
    assert raised.value.public_message == ModelError.public_text
    messages = await stored(wired)
    assert [(m.role, m.completed) for m in messages] == [(Role.USER, True), (Role.ASSISTANT, False)]
    assert messages[1].content == "ab"  # stored once, by the stream it collected
    assert messages[1].debug is not None and messages[1].debug["error"] == ModelError.public_text


class _StalledModel(FakeChatModel):
    """Streams its answer only when released; tells when it has been asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, messages):  # type: ignore[no-untyped-def]
        self.prompts.append(list(messages))
        self.asked.set()
        await self.release.wait()
        yield ModelDelta(content="too late")


async def test_non_streaming_chat_cancelled_while_the_model_answers_still_stores_its_reply() -> None:
    # What the server does to a request still running when uvicorn's own shutdown timeout is over.
    model = _StalledModel()
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model)
    task = asyncio.create_task(wired.chat.handle(context(), question()))
    await asyncio.wait_for(model.asked.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    messages = await stored(wired)
    assert [(m.role, m.completed) for m in messages] == [(Role.USER, True), (Role.ASSISTANT, False)]
    assert messages[1].content == ""
    assert messages[1].debug["error"] == "client disconnected before the answer was complete"  # type: ignore[index]
    assert messages[1].debug["route"]["worker_name"] == "orchard:naive_rag_agent:retrieve_only"  # type: ignore[index]
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_non_streaming_chat_cancelled_twice_keeps_saving_and_drain_waits_for_it() -> None:
    class SlowStore(InMemoryConversationStore):
        def __init__(self) -> None:
            super().__init__()
            self.appending = asyncio.Event()
            self.go_on = asyncio.Event()

        async def append_message(self, conversation_id, message):  # type: ignore[no-untyped-def]
            if message.role is Role.ASSISTANT:
                self.appending.set()
                await self.go_on.wait()
            return await super().append_message(conversation_id, message)

    model, store = _StalledModel(), SlowStore()
    wired = wire(FakeAgent(results=ORCHARD_FACTS), model, store=store)
    task = asyncio.create_task(wired.chat.handle(context(), question()))
    await asyncio.wait_for(model.asked.wait(), 5)
    task.cancel()
    await asyncio.wait_for(store.appending.wait(), 5)  # the reply's write began; a 2nd cancellation must not stop it
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wired.stream.pending_saves == 1  # the stream's saver: what the service drains at shutdown
    store.go_on.set()
    await wired.saver.drain()
    assert [(m.role, m.completed) for m in await stored(wired)] == [(Role.USER, True), (Role.ASSISTANT, False)]


async def test_non_streaming_chat_bug_stores_an_interrupted_reply_and_raises_an_internal_error() -> None:
    class BrokenModel(FakeChatModel):
        async def stream(self, messages):  # type: ignore[no-untyped-def]
            raise KeyError("a bug, not a model error")
            yield  # an async generator

    wired = wire(FakeAgent(results=ORCHARD_FACTS), BrokenModel())
    with pytest.raises(GraphRagError) as raised:
        await wired.chat.handle(context(), question())
    # What the server answers to any unexpected error: 500, internal_error, "internal server error".
    assert type(raised.value) is GraphRagError and raised.value.code == "internal_error"
    assert (status_for(raised.value), raised.value.public_message) == (500, "internal server error")
    messages = await stored(wired)
    assert [(m.role, m.completed) for m in messages] == [(Role.USER, True), (Role.ASSISTANT, False)]
    assert messages[1].debug["error"] == INTERNAL_ERROR_MESSAGE  # type: ignore[index]


class _ClearingStore(InMemoryConversationStore):
    """Takes no answer: its question was cleared while it was being written."""

    async def append_message(self, conversation_id, message):  # type: ignore[no-untyped-def]
        if message.role is Role.ASSISTANT:
            raise QuestionCleared()
        return await super().append_message(conversation_id, message)


class _RefusingStore(InMemoryConversationStore):
    """Goes down after the question was stored."""

    async def append_message(self, conversation_id, message):  # type: ignore[no-untyped-def]
        if message.role is Role.ASSISTANT:
            raise ConversationStoreUnavailable("Postgres at db:5432 is unavailable")
        return await super().append_message(conversation_id, message)


@pytest.mark.parametrize(
    ("store", "error"),
    [(_ClearingStore, QuestionCleared), (_RefusingStore, AnswerNotSaved)],
    ids=["cleared", "store-down"],
)
async def test_non_streaming_chat_whose_answer_is_not_kept_raises_what_the_stream_said(
    store: type[InMemoryConversationStore], error: type[GraphRagError]
) -> None:
    wired = wire(FakeAgent(results=ORCHARD_FACTS), FakeChatModel(deltas=("kept?",)), store=store())
    turn = await wired.stream.prepare(context(), question())
    events = [event async for event in wired.stream.events(turn)]
    said = next(e for e in events if isinstance(e, ErrorEvent))
    assert isinstance(events[-1], DoneEvent) and events[-1].message_id is None
    with pytest.raises(error) as raised:
        await wired.chat.handle(context("req-2"), question())
    # The status and the body of the error the handler raised before it collected the stream: 409 / 503.
    assert type(raised.value) is error
    assert (raised.value.code, raised.value.public_message) == (said.code, said.message)
    assert status_for(raised.value) == status_for(error("x"))
