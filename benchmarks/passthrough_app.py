"""A bare FastAPI pass-through of an OpenAI-compatible stream: the baseline of benchmarks/streaming_latency.py.

One POST endpoint, `/stream` with `{"message": "..."}`: it streams the upstream model (raw httpx SSE line
parsing and orjson, the same parse as `OpenAICompatibleChatModel.stream`) and forwards every content delta
at once as one SSE frame `data: {"status":"token","content":"..."}\\n\\n` through a `StreamingResponse`.
No history, no routing, no store, no event protocol: the least a FastAPI server can do per token.

`parse_delta` and `upstream_body` are module functions looked up on every call so that the benchmark's
instrumented launcher can wrap them to stamp time (as it wraps the product's adapter).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel


class StreamRequest(BaseModel):
    message: str


def upstream_body(model: str, message: str) -> dict[str, Any]:
    """The upstream request, as the product's adapter sends it."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": message}],
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def parse_delta(payload: str) -> str:
    """One `data:` payload → its content delta ("" when it carries none)."""
    chunk = orjson.loads(payload)
    choices = chunk.get("choices")
    if choices:
        delta = choices[0].get("delta")
        if delta:
            return str(delta.get("content") or "")
    return ""


def build_passthrough_app(base_url: str, model: str, api_key: str = "unused") -> FastAPI:
    url = f"{base_url.rstrip('/')}/chat/completions"
    headers = {"authorization": f"Bearer {api_key}"}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=30.0)) as client:
            yield {"client": client}

    app = FastAPI(lifespan=lifespan)

    @app.post("/stream")
    async def stream(body: StreamRequest, request: Request) -> StreamingResponse:
        client: httpx.AsyncClient = request.state.client
        return StreamingResponse(_frames(client, url, headers, model, body.message), media_type="text/event-stream")

    return app


async def _frames(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], model: str, message: str
) -> AsyncIterator[bytes]:
    async with client.stream("POST", url, json=upstream_body(model, message), headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line[:5] != "data:":
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            content = parse_delta(payload)
            if content:
                yield b"data: " + orjson.dumps({"status": "token", "content": content}) + b"\n\n"
