"""One streamed completion as OpenAI `chat.completion.chunk` frames.

`data: {chunk}\\n\\n` frames with LF separators: a first chunk with `delta.role`, one chunk per model delta (sent
as it arrives), a last chunk with the cited and consulted sources as `delta.annotations` and
`finish_reason: "stop"`, then `data: [DONE]`. With `stream_options.include_usage`, as OpenAI does: every chunk
has `"usage": null`, and one more chunk before `[DONE]` has no choices and the usage. An error mid-stream is an
`{"error": {...}}` frame in OpenAI's shape (the openai SDKs raise it), followed by `[DONE]` and no last chunk.
"""

from __future__ import annotations

from typing import Any

import orjson

from backend.domain.events import DoneEvent, ErrorEvent, ReasoningEvent, StartEvent, StreamEvent, TokenEvent
from backend.server.api.openai_facade.models import CompletionUsage
from backend.server.api.openai_facade.streamed import StreamedAnswer
from backend.server.errors import openai_error_body, status_for_code

DONE_FRAME = b"data: [DONE]\n\n"


class CompletionChunks:
    """Encodes the events of one request; what the last chunks need is kept in a `StreamedAnswer`."""

    def __init__(
        self, completion_id: str, created: int, model: str, base_url: str, include_usage: bool = False
    ) -> None:
        self._envelope: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self._answer = StreamedAnswer(base_url)
        self._include_usage = include_usage
        # A token frame is `prefix + JSON string + suffix`, built once: per token only the text is dumped.
        head = orjson.dumps(self._envelope)[:-1]
        self._token_prefix = b"data: " + head + b',"choices":[{"index":0,"delta":{"content":'
        usage = b',"usage":null' if include_usage else b""
        self._token_suffix = b'},"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"

    def frame(self, event: StreamEvent) -> bytes:
        """The bytes to send for this event; empty when the event has no place in the protocol."""
        if type(event) is TokenEvent:  # most of a stream: the JSON of `_chunk({"content": text})`
            self._answer.pieces.append(event.text)
            return self._token_prefix + orjson.dumps(event.text) + self._token_suffix
        self._answer.note(event)
        match event:
            case StartEvent():
                return self._chunk({"role": "assistant", "content": ""})
            case ReasoningEvent(text=text):
                # The field OpenAI-compatible reasoning models use; front ends show it apart from the answer.
                return self._chunk({"reasoning_content": text})
            case ErrorEvent(message=message, code=code):
                body = openai_error_body(status_for_code(code), code, message)
                return b"data: " + orjson.dumps(body) + b"\n\n"
            case DoneEvent() if self._answer.error is not None:
                return DONE_FRAME
            case DoneEvent():
                return self._last_chunk() + self._usage_chunk() + DONE_FRAME
        return b""

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._frame([choice], None)

    def _frame(self, choices: list[dict[str, Any]], usage: CompletionUsage | None) -> bytes:
        chunk = {**self._envelope, "choices": choices}
        if self._include_usage:
            chunk["usage"] = usage.model_dump() if usage else None
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _usage_chunk(self) -> bytes:
        return self._frame([], CompletionUsage.of(self._answer.usage)) if self._include_usage else b""

    def _last_chunk(self) -> bytes:
        annotations = [annotation.model_dump() for annotation in self._answer.annotations()]
        return self._chunk({"annotations": annotations}, finish_reason="stop")
