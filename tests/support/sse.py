"""A small SSE reader for tests: records every frame and comment with its arrival time."""

from __future__ import annotations

import time
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


def _consume_lines(buffer: bytearray, capture: StreamCapture) -> None:
    while b"\n" in buffer:
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        if line.startswith(b"data: "):
            capture.events.append(orjson.loads(line[len(b"data: ") :]))
            capture.received_at.append(time.perf_counter())
        elif line.startswith(b":"):
            capture.comments.append(line[1:].decode().strip())


async def read_stream(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    stop_after_tokens: int | None = None,
    headers: dict[str, str] | None = None,
) -> StreamCapture:
    """POST and read the SSE stream; with `stop_after_tokens`, hang up after that many token events."""
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
            _consume_lines(buffer, capture)
            if stop_after_tokens is not None and len(capture.of("token")) >= stop_after_tokens:
                break
    return capture
