"""The event pipeline, the debug middleware and the per-request budgets (SPEC §10)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.debug_middleware import TRUNCATE_CHARS, DebugMiddleware
from backend.application.chat.inputs import ChatInput
from backend.application.chat.pipeline import EventOutcome, EventPipeline, Run, RunOutcome
from backend.domain.budget import RequestBudget, budget_scope, current_budget
from backend.domain.context import RequestContext
from backend.domain.conversation import Message, Role
from backend.domain.debug import DebugLevel
from backend.domain.errors import BudgetExceeded
from backend.domain.events import (
    DoneEvent,
    ErrorEvent,
    EventKind,
    ExecutionLogEvent,
    ProgressEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)
from backend.infrastructure.llm.accounted_model import AccountedChatModel
from tests.support.fakes import FakeAgent, FakeChatModel, evidence
from tests.support.wiring import Wired, wire

FACTS = [evidence("chunk:1", "The orchard was founded in 1952 by Ada Fenwick. " * 30, 0.9, "History")]


def run(level: DebugLevel = DebugLevel.OFF) -> Run:
    return Run(RequestContext("req-1", "alice", "s1", level), "When was the orchard founded?")


class Shout:
    """Upper-cases tokens, drops reasoning-free progress of generation, adds an event after `start`."""

    name = "shout"

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[RunOutcome] = []

    async def on_run_start(self, run: Run) -> None:
        self.started.append(run.context.request_id)

    def on_event(self, run: Run, event: StreamEvent) -> EventOutcome:
        if isinstance(event, TokenEvent):
            return TokenEvent(event.text.upper())
        if isinstance(event, ProgressEvent) and event.stage is Stage.GENERATION:
            return None
        if isinstance(event, StartEvent):
            return event, ExecutionLogEvent("shouting")
        return event

    async def on_run_end(self, run: Run, outcome: RunOutcome) -> Sequence[StreamEvent]:
        self.ended.append(outcome)
        return (TokenEvent("!"),)


class Broken:
    name = "broken"

    async def on_run_start(self, run: Run) -> None:
        raise RuntimeError("start")

    def on_event(self, run: Run, event: StreamEvent) -> EventOutcome:
        raise RuntimeError("event")

    async def on_run_end(self, run: Run, outcome: RunOutcome) -> Sequence[StreamEvent]:
        raise RuntimeError("end")


class DropEverything:
    name = "drop"

    async def on_run_start(self, run: Run) -> None:
        return None

    def on_event(self, run: Run, event: StreamEvent) -> EventOutcome:
        return None

    async def on_run_end(self, run: Run, outcome: RunOutcome) -> Sequence[StreamEvent]:
        return ()


def test_middlewares_transform_drop_and_add_events_in_order() -> None:
    pipeline = EventPipeline([Shout()])
    current = run()
    assert [e.kind for e in pipeline.process(current, StartEvent())] == [EventKind.START, EventKind.EXECUTION_LOG]
    assert pipeline.process(current, TokenEvent("abc")) == (TokenEvent("ABC"),)
    assert pipeline.process(current, ProgressEvent(Stage.GENERATION)) == ()
    assert pipeline.process(current, ProgressEvent(Stage.ROUTING)) == (ProgressEvent(Stage.ROUTING),)


async def test_a_failing_stage_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    pipeline = EventPipeline([Broken(), Shout()])
    current = run()
    with caplog.at_level(logging.ERROR):
        await pipeline.start(current)
        processed = pipeline.process(current, TokenEvent("abc"))
        added = await pipeline.finish(current, RunOutcome(completed=True))
    assert processed == (TokenEvent("ABC"),)  # the broken stage let it through; the next one still ran
    assert added == [TokenEvent("!")]
    failures = [r.getMessage() for r in caplog.records if "broken" in r.getMessage()]
    assert len(failures) == 3 and all("req-1" in message for message in failures)


def test_start_and_done_are_never_dropped() -> None:
    pipeline = EventPipeline([DropEverything()])
    current = run()
    assert pipeline.process(current, StartEvent()) == (StartEvent(),)
    assert pipeline.process(current, DoneEvent("m1")) == (DoneEvent("m1"),)
    assert pipeline.process(current, TokenEvent("x")) == ()


async def test_events_added_at_the_end_pass_only_the_stages_after_the_one_that_added_them() -> None:
    shout = Shout()
    pipeline = EventPipeline([shout, Shout()])
    added = await pipeline.finish(run(), RunOutcome(completed=False, error="boom"))
    assert added == [TokenEvent("!"), TokenEvent("!")]  # the first one's "!" went through the second (upper: same)
    assert shout.ended == [RunOutcome(False, "boom")]


# --- through the stream use case ---------------------------------------------------------------------------


async def answer(wired: Wired, level: DebugLevel = DebugLevel.OFF) -> list[StreamEvent]:
    context = RequestContext("req-1", "alice", "s1", level)
    turn = await wired.stream.prepare(context, ChatInput(session_id="s1", message="When?", kb_prefix="orchard"))
    return [event async for event in wired.stream.events(turn)]


async def stored_answer(wired: Wired):  # type: ignore[no-untyped-def]
    conversation = await wired.store.find_conversation_id("alice", "s1")
    assert conversation is not None
    return [m for m in await wired.store.list_messages(conversation) if m.role is Role.ASSISTANT][-1]


async def test_the_stored_answer_is_what_left_the_pipeline() -> None:
    shout = Shout()
    wired = wire(
        FakeAgent(results=FACTS), FakeChatModel(deltas=("founded", " in 1952")), pipeline=EventPipeline([shout])
    )
    events = await answer(wired)
    assert [e.text for e in events if isinstance(e, TokenEvent)] == ["FOUNDED", " IN 1952", "!"]
    assert not any(isinstance(e, ProgressEvent) and e.stage is Stage.GENERATION for e in events)
    assert events[0] == StartEvent() and isinstance(events[-1], DoneEvent)
    assert (await stored_answer(wired)).content == "FOUNDED IN 1952!"
    assert shout.started == ["req-1"] and shout.ended == [RunOutcome(completed=True)]


def logs(events: Sequence[StreamEvent]) -> list[ExecutionLogEvent]:
    return [e for e in events if isinstance(e, ExecutionLogEvent)]


@pytest.mark.parametrize(
    ("level", "nodes"),
    [
        (DebugLevel.OFF, []),
        (DebugLevel.BASIC, ["timings"]),
        (DebugLevel.STANDARD, ["route", "retrieval:naive_rag_agent", "model_call", "timings"]),
        (DebugLevel.FULL, ["route", "retrieval:naive_rag_agent", "model_call", "timings"]),
    ],
)
async def test_the_debug_level_decides_what_is_logged_and_stored(level: DebugLevel, nodes: list[str]) -> None:
    model = AccountedChatModel(FakeChatModel(deltas=("Founded", " in 1952.")))
    wired = wire(FakeAgent(results=FACTS), model, pipeline=EventPipeline([DebugMiddleware()]))
    events = await answer(wired, level)
    assert [e.node for e in logs(events)] == nodes
    stored = await stored_answer(wired)
    assert [entry["node"] for entry in (stored.debug or {}).get("execution_log", [])] == nodes
    if level is DebugLevel.OFF:
        return
    timings = logs(events)[-1].output
    assert timings["completed"] is True and timings["total_ms"] >= timings["first_token_ms"] > 0
    assert timings["generation_ms"] is not None and timings["routing_ms"] is not None
    if level.at_least(DebugLevel.STANDARD):
        retrieval = next(e for e in logs(events) if e.node.startswith("retrieval:"))
        assert [r["id"] for r in retrieval.output["results"]] == ["chunk:1"]
        assert ("text" in retrieval.output["results"][0]) is (level is DebugLevel.FULL)
        call = next(e for e in logs(events) if e.node == "model_call")
        prompt = "".join(m["content"] for m in call.input["messages"])
        assert "Ada Fenwick" in prompt
        longest = max(len(m["content"]) for m in call.input["messages"])
        assert (longest > TRUNCATE_CHARS + 40) is (level is DebugLevel.FULL)  # standard cuts long texts


async def test_going_over_the_model_call_budget_ends_the_stream_with_a_clear_error() -> None:
    model = AccountedChatModel(FakeChatModel(deltas=("never",)))
    wired = wire(FakeAgent(results=FACTS), model, budgets=BudgetPolicy(max_model_calls=0))
    events = await answer(wired)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.code for e in errors] == ["budget_exceeded"] and "model calls" in errors[0].message
    assert isinstance(events[-1], DoneEvent)
    stored = await stored_answer(wired)
    assert stored.completed is False and stored.content == ""


async def test_going_over_the_time_budget_keeps_the_partial_answer() -> None:
    model = AccountedChatModel(FakeChatModel(deltas=("one", " two", " three", " four"), delay_s=0.25))
    wired = wire(FakeAgent(results=FACTS), model, budgets=BudgetPolicy(timeout_s=0.6))
    events = await answer(wired)
    assert [e.code for e in events if isinstance(e, ErrorEvent)] == ["budget_exceeded"]
    stored = await stored_answer(wired)
    tokens = [e.text for e in events if isinstance(e, TokenEvent)]
    assert stored.completed is False and stored.content == "".join(tokens) and 0 < len(tokens) < 4


async def test_each_request_has_its_own_budget() -> None:
    outer = RequestBudget(max_model_calls=1)
    with budget_scope(outer):
        outer.charge_model_call()
        with budget_scope(RequestBudget(max_model_calls=5)) as inner:
            inner.charge_model_call()
            assert current_budget() is inner
        assert current_budget() is outer
        with pytest.raises(BudgetExceeded):
            outer.charge_model_call()
    assert current_budget() is None


async def test_model_calls_are_logged_and_recorded_with_secrets_masked(caplog: pytest.LogCaptureFixture) -> None:
    model = AccountedChatModel(FakeChatModel(deltas=("ok",)), secrets=["sk-live-0123456789abcdef"])
    leaky = [
        Message(Role.SYSTEM, "use api_key=sk-live-0123456789abcdef and Authorization: Bearer tok-987654321"),
        Message(Role.USER, 'my {"password": "hunter22"} and the key sk-live-0123456789abcdef'),
    ]
    budget = RequestBudget()
    with caplog.at_level(logging.DEBUG, logger="backend.model_calls"), budget_scope(budget):
        assert await model.complete(leaky) == "ok"
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "backend.model_calls")
    recorded = " ".join(content for call in budget.model_calls() for _, content in call.messages)
    assert "model call: model=fake" in logged and "***" in logged and "***" in recorded
    for secret in ("sk-live-0123456789abcdef", "tok-987654321", "hunter22"):
        assert secret not in logged and secret not in recorded
    assert budget.charged == 1 and budget.model_calls()[0].answer == "ok"


async def test_the_plain_chat_use_case_has_the_same_budgets() -> None:
    model = AccountedChatModel(FakeChatModel(deltas=("never",)))
    wired = wire(FakeAgent(results=FACTS), model, budgets=BudgetPolicy(max_model_calls=0))
    context = RequestContext("req-1", "alice", "s1")
    with pytest.raises(BudgetExceeded) as raised:
        await wired.chat.handle(context, ChatInput(session_id="s1", message="When?", kb_prefix="orchard"))
    assert raised.value.public_message == BudgetExceeded.public_text  # what the stream's `error` said, and a 504
    stored = await stored_answer(wired)
    assert stored.completed is False and stored.content == ""

    model = AccountedChatModel(FakeChatModel(deltas=("one", " two", " three", " four"), delay_s=0.25))
    wired = wire(FakeAgent(results=FACTS), model, budgets=BudgetPolicy(timeout_s=0.6))
    with pytest.raises(BudgetExceeded):
        await wired.chat.handle(context, ChatInput(session_id="s1", message="When?", kb_prefix="orchard"))
    stored = await stored_answer(wired)
    assert stored.completed is False and stored.content.startswith("one") and stored.content != "one two three four"
