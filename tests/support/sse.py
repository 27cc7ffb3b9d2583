"""A small SSE reader for tests: records every frame and comment with its arrival time."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson


@dataclass
class StreamCapture:
    status_code: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytearray = field(default_factory=bytearray)
    events: list[dict[str, Any]] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)  # perf_counter per event
    comments: list[str] = field(default_factory=list)

    def of(self, status: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["status"] == status]

    @property
    def statuses(self) -> list[str]:
        return [event["status"] for event in self.events]

    @property
    def text(self) -> str:
        return "".join(event["content"] for event in self.of("token"))


def _consume_lines(buffer: bytearray, capture: StreamCapture) -> Iterator[None]:
    """Parse the complete lines in `buffer`; yields after each event is recorded."""
    while b"\n" in buffer:
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        if line.startswith(b"data: "):
            capture.events.append(orjson.loads(line[len(b"data: ") :]))
            capture.received_at.append(time.perf_counter())
            yield
        elif line.startswith(b":"):
            capture.comments.append(line[1:].decode().strip())


async def read_stream(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    stop_after_tokens: int | None = None,
    headers: dict[str, str] | None = None,
    on_event: Callable[[StreamCapture], Awaitable[None]] | None = None,
) -> StreamCapture:
    """POST and read the SSE stream; with `stop_after_tokens`, hang up after that many token events. `on_event`
    is awaited after each event arrives (a fault test injects its fault at a chosen point of the stream)."""
    capture = StreamCapture()
    buffer = bytearray()
    async with client.stream("POST", path, json=body, headers=headers) as response:
        capture.status_code = response.status_code
        capture.headers = dict(response.headers)
        if response.status_code != 200:
            await response.aread()
            capture.raw.extend(response.content)
            return capture
        async for chunk in response.aiter_raw():
            capture.raw.extend(chunk)
            buffer.extend(chunk)
            for _ in _consume_lines(buffer, capture):
                if on_event is not None:
                    await on_event(capture)
            if stop_after_tokens is not None and len(capture.of("token")) >= stop_after_tokens:
                break
    return capture
