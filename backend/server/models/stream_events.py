"""The stream event protocol on the wire (SPEC §5), produced by one normaliser.

Every event gets `status`, `request_id`, `seq` (0, 1, 2, ... per request) and `ts` (Unix seconds),
and is framed as `data: {json}\n\n` with LF separators.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    ReasoningEvent,
    StartEvent,
    StreamEvent,
    TokenEvent,
)


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
