"""Small helpers the fault tests share: sessions, polling with deadlines, history reads."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from tests.support.sse import StreamCapture, read_stream

T = TypeVar("T")


def new_session(prefix: str = "f") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def poll(check: Callable[[], Awaitable[T | None]], within_s: float, what: str, interval_s: float = 0.05) -> T:
    """Call `check` until it returns something other than None; fail with `what` after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        result = await check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within_s} s")
        await asyncio.sleep(interval_s)


async def messages(http: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    """The session's stored history (404: none stored)."""
    response = await http.get(f"/api/v1/conversations/{session}/messages")
    if response.status_code == 404:
        return []
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def ready(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/ready")
    body = dict(response.json())
    assert (response.status_code == 200) is body["ready"], response.text
    return body


async def read_stream_with(
    client: httpx.AsyncClient,
    body: dict[str, Any],
    on_event: Callable[[StreamCapture], Awaitable[None]],
    path: str = "/api/v1/chat/stream",
) -> StreamCapture:
    """POST and read the SSE stream to its end, calling `on_event` after each event arrives (to inject a fault
    at a chosen point of the stream)."""
    return await read_stream(client, path, body, on_event=on_event)


def error_messages(capture: StreamCapture) -> list[str]:
    return [str(event["message"]) for event in capture.of("error")]
