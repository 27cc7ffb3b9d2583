"""The SSE response used by every streaming endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Message, Send

PING_FRAME_COMMENT = "ping"


class EventStreamResponse(EventSourceResponse):
    """sse-starlette's response without a cancel scope around each frame when no send timeout is set.

    sse-starlette 3.7 opens `anyio.move_on_after(send_timeout)` for every frame even when
    `send_timeout` is None and the scope can never fire; on the token hot path that scope was the
    largest single cost per token (benchmarks/streaming_latency.py). Disconnects and pings are
    handled by the parent's other tasks and are unaffected (tests/e2e cover both).
    """

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is None:
            await send(message)
        else:
            await super()._send_with_timeout(send, message)


def event_stream(frames: AsyncIterator[bytes], heartbeat_s: float, headers: Mapping[str, str]) -> EventStreamResponse:
    """A stream of ready-made frames with LF separators, a `: ping` comment while idle and no caching."""
    return EventStreamResponse(
        frames,
        sep="\n",
        ping=heartbeat_s,
        ping_message_factory=lambda: ServerSentEvent(comment=PING_FRAME_COMMENT, sep="\n"),
        headers={**headers, "Cache-Control": "no-cache"},
    )
