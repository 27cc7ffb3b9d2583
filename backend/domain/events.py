"""Typed stream events (SPEC §5, §10). Each protocol turns them into its wire format in one place.

Most kinds are on the SSE wire as they are. Four are internal (`INTERNAL_KINDS`): the route decision, each
finished retrieval, with everything a protocol or a middleware may want from them (AG-UI shows them as
steps and tool calls, the debug middleware logs them), the numbered sources the answer is written
against, and the tokens the answer took; the SSE protocol shows the first two through `progress` events
and, with debug, `execution_log`, the sources through the `citations` event that follows the answer, and
the usage not at all (the OpenAI facade reports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from backend.domain.conversation import Citation
from backend.domain.retrieval import AgentRun, RagRunSpec
from backend.domain.routing import RouteDecision
from backend.domain.tokens import TokenUsage


class EventKind(StrEnum):
    START = "start"
    PROGRESS = "progress"
    SOURCES = "sources"
    CITATIONS = "citations"
    TOKEN = "token"
    REASONING = "reasoning"
    ERROR = "error"
    EXECUTION_LOG = "execution_log"
    DONE = "done"
    ROUTED = "routed"
    RETRIEVED = "retrieved"
    USAGE = "usage"


INTERNAL_KINDS = frozenset({EventKind.ROUTED, EventKind.RETRIEVED, EventKind.SOURCES, EventKind.USAGE})


class Stage(StrEnum):
    ROUTING = "routing"
    RETRIEVAL = "retrieval"
    GENERATION = "generation"


@dataclass(frozen=True, slots=True)
class StartEvent:
    kind: EventKind = field(default=EventKind.START, init=False)


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    stage: Stage
    completed: int = 0
    total: int = 0
    error: str | None = None
    agent_type: str = ""
    retrieval_count: int | None = None
    kind: EventKind = field(default=EventKind.PROGRESS, init=False)


@dataclass(frozen=True, slots=True)
class SourcesEvent:
    """Internal, before the first token: the sources the answer is written against, numbered from 1 in this
    order (the evidence given to the model or quoted). The stream renumbers the answer's markers against them
    (domain/citations.py)."""

    sources: tuple[Citation, ...]
    kind: EventKind = field(default=EventKind.SOURCES, init=False)


@dataclass(frozen=True, slots=True)
class CitationsEvent:
    """After the answer's last token: the sources its text cites (`[n]` counts from 1 in this order), and the
    other sources it was given (consulted, not cited)."""

    citations: tuple[Citation, ...]
    consulted: tuple[Citation, ...] = ()
    kind: EventKind = field(default=EventKind.CITATIONS, init=False)


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Internal, once the answer's text is generated: the tokens it took, as its model reported them or
    estimated when none did."""

    usage: TokenUsage
    kind: EventKind = field(default=EventKind.USAGE, init=False)


@dataclass(frozen=True, slots=True)
class TokenEvent:
    text: str
    kind: EventKind = field(default=EventKind.TOKEN, init=False)


@dataclass(frozen=True, slots=True)
class ReasoningEvent:
    text: str
    kind: EventKind = field(default=EventKind.REASONING, init=False)


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    message: str
    code: str = "error"
    kind: EventKind = field(default=EventKind.ERROR, init=False)


@dataclass(frozen=True, slots=True)
class ExecutionLogEvent:
    node: str
    input: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    kind: EventKind = field(default=EventKind.EXECUTION_LOG, init=False)

    def to_dict(self) -> dict[str, Any]:
        """The entry as stored in an answer's debug and sent by every protocol."""
        return {"node": self.node, "input": self.input, "output": self.output, "duration_ms": self.duration_ms}


@dataclass(frozen=True, slots=True)
class DoneEvent:
    message_id: str | None
    kind: EventKind = field(default=EventKind.DONE, init=False)


@dataclass(frozen=True, slots=True)
class RoutedEvent:
    """Internal: the router's decision for this message, and the retrievals it plans (in plan order)."""

    message: str
    decision: RouteDecision
    duration_ms: float = 0.0
    plan: tuple[RagRunSpec, ...] = ()
    kind: EventKind = field(default=EventKind.ROUTED, init=False)


@dataclass(frozen=True, slots=True)
class RetrievedEvent:
    """Internal: one retrieval agent finished (with results or an error)."""

    query: str
    kb_prefix: str
    run: AgentRun
    kind: EventKind = field(default=EventKind.RETRIEVED, init=False)


StreamEvent = (
    StartEvent
    | ProgressEvent
    | SourcesEvent
    | CitationsEvent
    | TokenEvent
    | ReasoningEvent
    | ErrorEvent
    | ExecutionLogEvent
    | DoneEvent
    | RoutedEvent
    | RetrievedEvent
    | UsageEvent
)
