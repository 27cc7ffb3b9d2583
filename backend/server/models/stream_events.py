"""The stream event protocol on the wire (SPEC §5), produced by one normaliser.

Every event gets `status`, `request_id`, `seq` (0, 1, 2, ... per request) and `ts` (Unix seconds),
and is framed as `data: {json}\n\n` with LF separators.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    ReasoningEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)
from backend.server.models.responses import CitationOut


def event_fields(event: StreamEvent) -> dict[str, Any]:
    """The event-specific part of the wire shape."""
    match event:
        case TokenEvent(text=text) | ReasoningEvent(text=text):
            return {"content": text}
        case ProgressEvent():
            return {
                "content": {
                    "stage": event.stage.value,
                    "completed": event.completed,
                    "total": event.total,
                    "error": event.error,
                    "agent_type": event.agent_type,
                    "retrieval_count": event.retrieval_count,
                }
            }
        case CitationsEvent(citations=citations, consulted=consulted):
            return {
                "content": [citation.to_dict() for citation in citations],
                "consulted": [citation.to_dict() for citation in consulted],
            }
        case ErrorEvent(message=message, code=code):
            return {"message": message, "code": code}
        case ExecutionLogEvent():
            return {"content": event.to_dict()}
        case DoneEvent(message_id=message_id):
            return {"message_id": message_id}
        case StartEvent():
            return {}
    raise TypeError(f"not a stream event: {type(event).__name__}")


class StreamEventNormalizer:
    """Numbers and stamps the events of one request. Not shared between requests."""

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._seq = 0

    def normalize(self, event: StreamEvent) -> dict[str, Any]:
        if type(event) is TokenEvent:  # most of a stream: `event_fields`'s shape, without its dispatch
            wire: dict[str, Any] = {"status": "token", "content": event.text}
        else:
            wire = {"status": event.kind.value, **event_fields(event)}
        wire["request_id"] = self._request_id
        wire["seq"] = self._seq
        wire["ts"] = _now()
        self._seq += 1
        return wire

    def frame(self, event: StreamEvent) -> bytes:
        return b"data: " + orjson.dumps(self.normalize(event), default=_json_default) + b"\n\n"


def _now() -> float:
    """Unix time in seconds with microsecond resolution."""
    return time.time_ns() // 1000 / 1e6


def _json_default(value: object) -> object:
    # Debug payloads may carry sets or tuples from adapters; keep the stream alive, not exact.
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


# The wire shape as the API description shows it (docs/events.md); tests/unit check the normaliser's output
# against it.


class _WireEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(description="the same for every event of a request, and in the `X-Request-ID` header")
    seq: int = Field(ge=0, description="0, 1, 2, ... in order")
    ts: float = Field(description="Unix time in seconds")


class ProgressOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: Stage
    completed: int
    total: int
    error: str | None = Field(description="a retrieval's failure: `<agent> timed out after 5s`, `<agent> failed: ...`")
    agent_type: str
    retrieval_count: int | None


class ExecutionLogOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: str = Field(description="`route`, `retrieval:<agent>`, `model_call` or `timings`")
    input: dict[str, Any]
    output: dict[str, Any]
    duration_ms: float


class StreamStart(_WireEvent):
    status: Literal["start"]


class StreamProgress(_WireEvent):
    status: Literal["progress"]
    content: ProgressOut


class StreamToken(_WireEvent):
    status: Literal["token"]
    content: str = Field(description="a delta of the answer, as the model sent it (citation markers renumbered)")


class StreamReasoning(_WireEvent):
    status: Literal["reasoning"]
    content: str


class StreamCitations(_WireEvent):
    status: Literal["citations"]
    content: list[CitationOut] = Field(description="the sources the answer cites: `[n]` counts from 1 in this order")
    consulted: list[CitationOut] = Field(description="the other sources it was given, not cited")


class StreamError(_WireEvent):
    status: Literal["error"]
    message: str = Field(description="a fixed text of its code, never the cause")
    code: str = Field(description="`model_error`, `retrieval_failed`, `budget_exceeded`, `store_unavailable`, ...")


class StreamExecutionLog(_WireEvent):
    status: Literal["execution_log"]
    content: ExecutionLogOut


class StreamDone(_WireEvent):
    status: Literal["done"]
    message_id: str | None = Field(description="the stored answer's id; null if it could not be stored")


ChatStreamEvent = Annotated[
    StreamStart
    | StreamProgress
    | StreamToken
    | StreamReasoning
    | StreamCitations
    | StreamError
    | StreamExecutionLog
    | StreamDone,
    Field(discriminator="status"),
]
