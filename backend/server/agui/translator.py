"""Internal stream events → AG-UI 1.0 events, for one run.

The mapping (docs/protocols/agui.md):

    start                    RUN_STARTED (protocolVersion)
    progress routing 0/1     STEP_STARTED "routing"
    routed                   CUSTOM "route", STEP_FINISHED "routing"
    progress retrieval 0/N   per planned retrieval: STEP_STARTED "retrieval:<agent>", TOOL_CALL_START/ARGS/END
    retrieved                TOOL_CALL_RESULT (evidence ids and titles), STEP_FINISHED "retrieval:<agent>"
    progress generation 0/1  STEP_STARTED "generation", TEXT_MESSAGE_START (assistant)
    reasoning                REASONING_START / REASONING_MESSAGE_START (once), REASONING_MESSAGE_CONTENT
    token                    TEXT_MESSAGE_CONTENT (one per model delta)
    progress generation 1/1  TEXT_MESSAGE_END, STEP_FINISHED "generation"
    citations                CUSTOM "citations" (cited), CUSTOM "consulted" (given, not cited)
    execution_log            CUSTOM "execution_log" (debug runs only)
    error                    remembered; the run ends with RUN_ERROR
    done                     whatever is still open is closed, then RUN_FINISHED or RUN_ERROR

The client's verifier rejects a run that finishes with an open step, message or tool call, so the
translator tracks what it opened and closes it in order at the end, also after an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION

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
    UsageEvent,
)
from backend.domain.retrieval import AgentRun

logger = logging.getLogger(__name__)

RETRIEVAL_TOOL = "retrieve"
ROUTING_STEP = "routing"
GENERATION_STEP = "generation"
# Every kind of event a run can send, in the order a full run first sends them (the API description lists them).
SENT_EVENTS: tuple[type[BaseEvent], ...] = (
    RunStartedEvent,
    StepStartedEvent,
    StepFinishedEvent,
    ToolCallStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningEndEvent,
    TextMessageStartEvent,
    TextMessageContentEvent,  # written by hand on the hot path (`_text_frame`), with the same JSON
    TextMessageEndEvent,
    CustomEvent,
    RunFinishedEvent,
    RunErrorEvent,
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Retrieval:
    """A retrieval announced as a step and a tool call, waiting for its result."""

    agent_type: str
    step_name: str
    tool_call_id: str


@dataclass(slots=True)
class _RunState:
    open_steps: list[str] = field(default_factory=list)
    pending: list[_Retrieval] = field(default_factory=list)
    planned: tuple[str, ...] = ()  # agent types the route plans, announced when retrieval starts
    kb_prefix: str = ""
    query: str = ""
    message_open: bool = False
    reasoning_open: bool = False
    error: ErrorEvent | None = None
    finished: bool = False
    tool_calls: int = 0


class AguiTranslator:
    """Translates the events of one run. Stateful and cheap; made per request, never shared."""

    def __init__(self, thread_id: str, run_id: str, clock: Callable[[], int] = now_ms) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.message_id = f"{run_id}-answer"
        self._reasoning_id = f"{run_id}-reasoning"
        self._clock = clock
        self._state = _RunState()

    @property
    def finished(self) -> bool:
        return self._state.finished

    def frames(self, event: StreamEvent) -> list[bytes]:
        """The SSE frames (`data: {json}\\n\\n`, LF only) for one internal event."""
        if self._state.finished:
            logger.warning("AG-UI run %s: %s after the run ended, skipped", self.run_id, event.kind)
            return []
        if type(event) is TokenEvent:  # most of a run: written by `_text_frame`, not as a typed event
            opening = self._open_message()  # empty but at the first token, or the first after reasoning
            frame = self._text_frame(event.text)
            return [*map(encode, opening), frame] if opening else [frame]
        return [encode(out) for out in self._translate(event)]

    def _translate(self, event: StreamEvent) -> list[BaseEvent]:
        """The typed events of an unfinished run for every internal event but a token."""
        match event:
            case StartEvent():
                return [
                    RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)
                ]
            case ProgressEvent():
                return self._progress(event)
            case RoutedEvent():
                return self._routed(event)
            case RetrievedEvent():
                return self._retrieved(event)
            case SourcesEvent():  # shown as the citations and consulted sources once the answer is complete
                return []
            case UsageEvent():  # AG-UI has no place for token counts
                return []
            case CitationsEvent(citations=citations, consulted=consulted):
                return [
                    CustomEvent(name="citations", value=[citation.to_dict() for citation in citations]),
                    CustomEvent(name="consulted", value=[citation.to_dict() for citation in consulted]),
                ]
            case ReasoningEvent(text=text):
                return self._reasoning(text)
            case ExecutionLogEvent():
                return [CustomEvent(name="execution_log", value=event.to_dict())]
            case ErrorEvent():
                self._state.error = self._state.error or event
                return []
            case DoneEvent(message_id=message_id):
                return self._done(message_id)
        logger.warning("AG-UI run %s: no AG-UI form for %s events, skipped", self.run_id, type(event).__name__)
        return []

    def abort(self, message: str, code: str) -> list[BaseEvent]:
        """End the run now with RUN_ERROR (the internal stream failed before `done`)."""
        if self._state.finished:
            return []
        self._state.error = ErrorEvent(message, code)
        return self._done(None)

    def _text_frame(self, delta: str) -> bytes:
        """TEXT_MESSAGE_CONTENT for one model delta: the JSON `encode` writes for the typed event, built here
        without a pydantic model per token."""
        body = {
            "type": "TEXT_MESSAGE_CONTENT",
            "timestamp": self._clock(),
            "messageId": self.message_id,
            "delta": delta,
        }
        return b"data: " + orjson.dumps(body) + b"\n\n"

    # -- stages ---------------------------------------------------------------------------------------

    def _progress(self, event: ProgressEvent) -> list[BaseEvent]:
        if event.completed != 0 and not (event.stage is Stage.GENERATION and event.completed == event.total):
            return []  # counts in between: the retrieved events say more
        match event.stage:
            case Stage.ROUTING:
                return self._start_step(ROUTING_STEP)
            case Stage.RETRIEVAL:
                return self._start_retrievals()
            case Stage.GENERATION if event.completed == 0:
                return self._start_step(GENERATION_STEP)  # the message opens at the first token, after reasoning
            case Stage.GENERATION:  # an answer without a token is still a (empty) message
                return [*self._open_message(), *self._close_message(), *self._finish_step(GENERATION_STEP)]
        return []

    def _routed(self, event: RoutedEvent) -> list[BaseEvent]:
        self._state.kb_prefix = event.decision.kb_prefix
        self._state.query = event.message
        self._state.planned = tuple(spec.agent_type for spec in event.plan)
        route = event.decision.to_dict() | {"duration_ms": event.duration_ms}
        return [CustomEvent(name="route", value=route), *self._finish_step(ROUTING_STEP)]

    def _start_retrievals(self) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        for agent_type in self._state.planned:
            events += self._announce(agent_type, self._state.kb_prefix, self._state.query)
        self._state.planned = ()
        return events

    def _announce(self, agent_type: str, kb_prefix: str, query: str) -> list[BaseEvent]:
        self._state.tool_calls += 1
        taken = {retrieval.step_name for retrieval in self._state.pending} | set(self._state.open_steps)
        step_name = f"retrieval:{agent_type}"
        if step_name in taken:  # the same agent twice in one plan: steps need distinct names
            step_name = f"{step_name}#{self._state.tool_calls}"
        retrieval = _Retrieval(agent_type, step_name, f"{self.run_id}-retrieval-{self._state.tool_calls}")
        self._state.pending.append(retrieval)
        arguments = orjson.dumps({"query": query, "kb": kb_prefix, "agent": agent_type}).decode()
        return [
            *self._start_step(step_name),
            ToolCallStartEvent(tool_call_id=retrieval.tool_call_id, tool_call_name=RETRIEVAL_TOOL),
            ToolCallArgsEvent(tool_call_id=retrieval.tool_call_id, delta=arguments),
            ToolCallEndEvent(tool_call_id=retrieval.tool_call_id),
        ]

    def _retrieved(self, event: RetrievedEvent) -> list[BaseEvent]:
        run = event.run
        retrieval = next((r for r in self._state.pending if r.agent_type == run.agent_type), None)
        events: list[BaseEvent] = []
        if retrieval is None:  # not announced (a KB-specific handler, or no plan): announce it now
            events += self._announce(run.agent_type, event.kb_prefix, event.query)
            retrieval = self._state.pending[-1]
        self._state.pending.remove(retrieval)
        events.append(
            ToolCallResultEvent(
                message_id=f"{retrieval.tool_call_id}-result",
                tool_call_id=retrieval.tool_call_id,
                role="tool",
                content=orjson.dumps(tool_result(run)).decode(),
            )
        )
        return [*events, *self._finish_step(retrieval.step_name)]

    def _reasoning(self, text: str) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if not self._state.reasoning_open:
            self._state.reasoning_open = True
            events += [
                ReasoningStartEvent(message_id=self._reasoning_id),
                ReasoningMessageStartEvent(message_id=self._reasoning_id, role="reasoning"),
            ]
        return [*events, ReasoningMessageContentEvent(message_id=self._reasoning_id, delta=text)]

    def _done(self, message_id: str | None) -> list[BaseEvent]:
        events = [*self._close_reasoning(), *self._close_message()]
        for retrieval in list(self._state.pending):  # announced but never answered (an error cut it short)
            self._state.pending.remove(retrieval)
            events += self._finish_step(retrieval.step_name)
        for step in reversed(self._state.open_steps):
            events.append(StepFinishedEvent(step_name=step))
        self._state.open_steps.clear()
        self._state.finished = True
        error = self._state.error
        if error is not None:
            return [*events, RunErrorEvent(message=error.message, code=error.code)]
        result: dict[str, Any] = {"message_id": message_id}
        return [*events, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result)]

    # -- open/close bookkeeping -----------------------------------------------------------------------

    def _start_step(self, name: str) -> list[BaseEvent]:
        if name in self._state.open_steps:
            return []
        self._state.open_steps.append(name)
        return [StepStartedEvent(step_name=name)]

    def _finish_step(self, name: str) -> list[BaseEvent]:
        if name not in self._state.open_steps:
            return []
        self._state.open_steps.remove(name)
        return [StepFinishedEvent(step_name=name)]

    def _open_message(self) -> list[BaseEvent]:
        if self._state.message_open:
            return self._close_reasoning()
        self._state.message_open = True
        return [*self._close_reasoning(), TextMessageStartEvent(message_id=self.message_id, role="assistant")]

    def _close_message(self) -> list[BaseEvent]:
        if not self._state.message_open:
            return []
        self._state.message_open = False
        return [TextMessageEndEvent(message_id=self.message_id)]

    def _close_reasoning(self) -> list[BaseEvent]:
        if not self._state.reasoning_open:
            return []
        self._state.reasoning_open = False
        return [
            ReasoningMessageEndEvent(message_id=self._reasoning_id),
            ReasoningEndEvent(message_id=self._reasoning_id),
        ]


def tool_result(run: AgentRun) -> dict[str, Any]:
    """What a retrieval tool call returns to the client: the evidence ids and titles, or the error."""
    evidence = [{"id": result.result_id, "title": result.source.title} for result in run.results]
    result: dict[str, Any] = {"agent": run.agent_type, "evidence": evidence, "duration_ms": run.duration_ms}
    if run.error is not None:
        result["error"] = run.error
    return result


def encode(event: BaseEvent) -> bytes:
    """One SSE frame with an LF separator; optional fields without a value are left out (as the SDK does)."""
    if event.timestamp is None:
        event.timestamp = now_ms()
    return b"data: " + event.model_dump_json(by_alias=True).encode() + b"\n\n"
