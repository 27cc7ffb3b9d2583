"""The AG-UI translator and input mapping, without a server: every frame must validate as an ag_ui.core event
and every run must close what it opened (the rules the official client enforces)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from ag_ui.core import Event, EventType, RunAgentInput
from pydantic import TypeAdapter

from backend.domain.conversation import Citation
from backend.domain.errors import InvalidRequest
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    ReasoningEvent,
    RetrievedEvent,
    RoutedEvent,
    SourcesEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.retrieval import AgentRun, EvidenceSource, Granularity, RagRunSpec, RetrievalResult
from backend.domain.routing import RouteDecision
from backend.domain.worker import Worker
from backend.server.agui.inputs import run_from_input
from backend.server.agui.translator import AguiTranslator

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)
QUESTION = "When was the orchard founded?"


ORCHARD = KnowledgeBase("orchard")


def decision(agent_type: str | None = "naive_rag_agent") -> RouteDecision:
    """A route to the orchard KB's `agent_type`, or to general chat."""
    worker = Worker(ORCHARD, agent_type) if agent_type else None
    kb = "orchard" if worker else "general"
    return RouteDecision(kb, kb, kb, 0.9, "explicit", "asked for", worker)


def run_of(agent: str, titles: tuple[str, ...] = ("History",), error: str | None = None) -> AgentRun:
    results = tuple(
        RetrievalResult(f"r{i}", Granularity.CHUNK, "text", EvidenceSource(f"d{i}", title, f"c{i}"), 0.5)
        for i, title in enumerate(titles)
    )
    return AgentRun(agent, f"orchard:{agent}:retrieve_only", results=results, error=error)


def rag_events(*agents: str, tokens: tuple[str, ...] = ("Founded", " 1921")) -> list[StreamEvent]:
    plan = tuple(RagRunSpec(Worker(ORCHARD, agent)) for agent in agents)
    events: list[StreamEvent] = [
        StartEvent(),
        ProgressEvent(Stage.ROUTING, 0, 1),
        ProgressEvent(Stage.ROUTING, 1, 1),
        RoutedEvent(QUESTION, decision(agents[0]), 1.5, plan),
        ProgressEvent(Stage.RETRIEVAL, 0, len(agents)),
    ]
    for index, agent in enumerate(reversed(agents)):  # runs finish in any order
        events += [
            ProgressEvent(Stage.RETRIEVAL, index + 1, len(agents), agent_type=agent),
            RetrievedEvent(QUESTION, "orchard", run_of(agent)),
        ]
    cited, consulted = Citation("1", "History", "d0", "c0", "snippet"), Citation("2", "Visits", "d1", "c1", "open")
    events += [
        SourcesEvent((cited, consulted)),
        ProgressEvent(Stage.GENERATION, 0, 1),
        *(TokenEvent(token) for token in tokens),
        ProgressEvent(Stage.GENERATION, 1, 1),
        CitationsEvent((cited,), (consulted,)),
        DoneEvent("msg-1"),
    ]
    return events


def translate_all(events: list[Any], translator: AguiTranslator | None = None) -> list[Any]:
    """Frames parsed back into ag_ui.core models: a frame that is not a valid AG-UI event fails here."""
    translator = translator or AguiTranslator("thread-1", "run-1", clock=lambda: 1_700_000_000_000)
    frames = [frame for event in events for frame in translator.frames(event)]
    assert all(frame.startswith(b"data: ") and frame.endswith(b"\n\n") and b"\r" not in frame for frame in frames)
    return [EVENTS.validate_json(frame[len(b"data: ") : -2]) for frame in frames]


def assert_well_formed(events: list[Any]) -> None:
    """The ordering rules of the official client's verifier, for one run."""
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    steps: set[str] = set()
    messages: set[str] = set()
    calls: set[str] = set()
    for event in events[1:-1]:
        assert event.type not in (EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR)
        match event.type:
            case EventType.STEP_STARTED:
                assert event.step_name not in steps
                steps.add(event.step_name)
            case EventType.STEP_FINISHED:
                steps.remove(event.step_name)
            case EventType.TEXT_MESSAGE_START | EventType.REASONING_MESSAGE_START:
                messages.add(event.message_id)
            case EventType.TEXT_MESSAGE_CONTENT | EventType.REASONING_MESSAGE_CONTENT:
                assert event.message_id in messages
            case EventType.TEXT_MESSAGE_END | EventType.REASONING_MESSAGE_END:
                messages.remove(event.message_id)
            case EventType.TOOL_CALL_START:
                calls.add(event.tool_call_id)
            case EventType.TOOL_CALL_ARGS:
                assert event.tool_call_id in calls
            case EventType.TOOL_CALL_END:
                calls.remove(event.tool_call_id)
    assert (steps, messages, calls) == (set(), set(), set()), "the run ended with something open"


def names(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


def test_a_rag_run_maps_to_steps_a_tool_call_per_retrieval_citations_and_one_message() -> None:
    events = translate_all(rag_events("naive_rag_agent"))
    assert_well_formed(events)
    assert names(events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "CUSTOM",
        "STEP_FINISHED",
        "STEP_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STEP_FINISHED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "CUSTOM",
        "CUSTOM",
        "RUN_FINISHED",
    ]
    assert events[0].protocol_version == "1.0"
    assert (events[0].thread_id, events[0].run_id) == ("thread-1", "run-1")
    assert events[2].name == "route" and events[2].value["worker_name"] == "orchard:naive_rag_agent:retrieve_only"
    assert orjson.loads(events[6].delta) == {"query": QUESTION, "kb": "orchard", "agent": "naive_rag_agent"}
    assert orjson.loads(events[8].content)["evidence"] == [{"id": "r0", "title": "History"}]
    assert events[-3].name == "citations" and [c["snippet"] for c in events[-3].value] == ["snippet"]
    assert events[-2].name == "consulted" and [c["snippet"] for c in events[-2].value] == ["open"]
    assert [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT] == ["Founded", " 1921"]
    assert events[-1].result == {"message_id": "msg-1"}


def test_parallel_retrievals_are_announced_together_and_closed_as_each_finishes() -> None:
    events = translate_all(rag_events("naive_rag_agent", "graph_agent", "naive_rag_agent"))
    assert_well_formed(events)
    started = [e.step_name for e in events if e.type is EventType.STEP_STARTED]
    assert started[1:4] == ["retrieval:naive_rag_agent", "retrieval:graph_agent", "retrieval:naive_rag_agent#3"]
    results = [e for e in events if e.type is EventType.TOOL_CALL_RESULT]
    assert len({e.tool_call_id for e in results}) == 3 and len({e.message_id for e in results}) == 3


def test_reasoning_is_its_own_message_closed_before_the_answer_starts() -> None:
    events: list[StreamEvent] = [
        StartEvent(),
        ProgressEvent(Stage.GENERATION, 0, 1),
        ReasoningEvent("think"),
        ReasoningEvent("ing"),
        TokenEvent("Hi"),
        ProgressEvent(Stage.GENERATION, 1, 1),
        DoneEvent("m"),
    ]
    translated = translate_all(events)
    assert_well_formed(translated)
    assert names(translated)[2:9] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
    ]


def test_an_error_closes_the_open_message_tool_calls_and_steps_then_ends_with_run_error() -> None:
    events: list[StreamEvent] = rag_events("naive_rag_agent")[:5]  # retrieval announced, never answered
    events += [ProgressEvent(Stage.GENERATION, 0, 1), TokenEvent("Partial"), ErrorEvent("model failed", "model_error")]
    events += [ExecutionLogEvent("timings", {}, {"total_ms": 3}), DoneEvent("m")]
    translated = translate_all(events)
    assert_well_formed(translated)
    assert translated[-1].type is EventType.RUN_ERROR
    assert (translated[-1].message, translated[-1].code) == ("model failed", "model_error")
    assert EventType.RUN_FINISHED not in [e.type for e in translated]
    assert any(e.type is EventType.CUSTOM and e.name == "execution_log" for e in translated)


def test_a_failed_retrieval_is_a_tool_result_with_the_error() -> None:
    events = rag_events("naive_rag_agent")
    failed = RetrievedEvent(QUESTION, "orchard", run_of("naive_rag_agent", (), error="timed out"))
    events = [failed if isinstance(event, RetrievedEvent) else event for event in events]
    result = next(e for e in translate_all(events) if e.type is EventType.TOOL_CALL_RESULT)
    assert orjson.loads(result.content) | {"duration_ms": 0} == {
        "agent": "naive_rag_agent",
        "evidence": [],
        "duration_ms": 0,
        "error": "timed out",
    }


def test_a_retrieval_the_route_did_not_plan_is_announced_when_it_arrives() -> None:
    events: list[StreamEvent] = [
        StartEvent(),
        RetrievedEvent(QUESTION, "orchard", run_of("graph_agent")),
        DoneEvent("m"),
    ]
    translated = translate_all(events)
    assert_well_formed(translated)
    assert names(translated)[1:7] == [
        "STEP_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STEP_FINISHED",
    ]


def test_an_answer_without_tokens_is_an_empty_message_and_general_chat_has_no_tool_calls() -> None:
    events: list[StreamEvent] = [
        StartEvent(),
        RoutedEvent("hi", decision(None), 1.0, ()),
        ProgressEvent(Stage.GENERATION, 0, 1),
        ProgressEvent(Stage.GENERATION, 1, 1),
        DoneEvent("m"),
    ]
    translated = translate_all(events)
    assert_well_formed(translated)
    assert "TOOL_CALL_START" not in names(translated)
    assert names(translated).count("TEXT_MESSAGE_START") == names(translated).count("TEXT_MESSAGE_END") == 1


def test_unknown_events_and_events_after_the_end_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    translator = AguiTranslator("thread-1", "run-1")
    translator.frames(StartEvent())
    assert translator.frames(object()) == []  # type: ignore[arg-type]
    assert "no AG-UI form" in caplog.text
    translator.frames(DoneEvent("m"))
    assert translator.finished and translator.frames(TokenEvent("late")) == []
    assert translator.abort("late", "x") == []


def test_abort_ends_an_unfinished_run_with_run_error() -> None:
    translator = AguiTranslator("thread-1", "run-1")
    started = translate_all([StartEvent(), ProgressEvent(Stage.ROUTING, 0, 1)], translator)
    closing = translator.abort("stream failed", "internal_error")
    assert [e.type for e in closing] == [EventType.STEP_FINISHED, EventType.RUN_ERROR]
    assert_well_formed(started + closing)


# -- RunAgentInput → ChatInput ---------------------------------------------------------------------------


def agent_input(messages: list[dict[str, Any]], props: Any = None) -> RunAgentInput:
    raw = {"threadId": "thread-1", "runId": "run-1", "messages": messages, "tools": [], "context": [], "state": {}}
    if props is not None:
        raw["forwardedProps"] = props
    return RunAgentInput.model_validate(raw)


USER = {"id": "u1", "role": "user", "content": "first"}


def test_the_last_user_message_is_the_question_and_text_parts_are_joined() -> None:
    parts = {"id": "u2", "role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assistant = {"id": "a1", "role": "assistant", "content": "answer"}
    run = run_from_input(agent_input([USER, assistant, parts]))
    assert (run.chat_input.session_id, run.chat_input.message) == ("thread-1", "a\nb")
    assert (run.chat_input.kb_prefix, run.chat_input.agent_type) == (None, None)


def test_kb_and_agent_come_from_the_path_or_forwarded_props_and_may_not_contradict() -> None:
    run = run_from_input(agent_input([USER], {"kb": "orchard", "agent": "graph_agent", "theme": "dark"}))
    assert (run.chat_input.kb_prefix, run.chat_input.agent_type) == ("orchard", "graph_agent")
    run = run_from_input(agent_input([USER], {"kb_prefix": "orchard", "debug": "basic"}), agent_type="naive_rag_agent")
    assert (run.chat_input.kb_prefix, run.chat_input.agent_type, run.props.debug) == (
        "orchard",
        "naive_rag_agent",
        "basic",
    )
    with pytest.raises(InvalidRequest, match="contradicts"):
        run_from_input(agent_input([USER], {"kb": "other"}), kb_prefix="orchard")


@pytest.mark.parametrize(
    ("messages", "props", "error"),
    [
        ([{"id": "a", "role": "assistant", "content": "hi"}], None, "no user message"),
        (
            [
                {
                    "id": "u",
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}],
                }
            ],
            None,
            "text",
        ),
        ([USER], ["not", "an", "object"], "must be an object"),
        ([USER], {"debug": "loud"}, "forwardedProps.debug"),
    ],
)
def test_input_the_server_cannot_serve_is_invalid(messages: list[dict[str, Any]], props: Any, error: str) -> None:
    with pytest.raises(InvalidRequest, match=error):
        run_from_input(agent_input(messages, props))
