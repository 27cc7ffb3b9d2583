"""Typed stream events (SPEC §5). The server turns them into the wire protocol in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from backend.domain.conversation import Citation


class EventKind(StrEnum):
    START = "start"
    PROGRESS = "progress"
    CITATIONS = "citations"
    TOKEN = "token"
    REASONING = "reasoning"
    ERROR = "error"
    EXECUTION_LOG = "execution_log"
    DONE = "done"


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
class CitationsEvent:
    citations: tuple[Citation, ...]
    kind: EventKind = field(default=EventKind.CITATIONS, init=False)


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


@dataclass(frozen=True, slots=True)
class DoneEvent:
    message_id: str | None
    kind: EventKind = field(default=EventKind.DONE, init=False)


StreamEvent = (
    StartEvent
    | ProgressEvent
    | CitationsEvent
    | TokenEvent
    | ReasoningEvent
    | ErrorEvent
    | ExecutionLogEvent
    | DoneEvent
)
