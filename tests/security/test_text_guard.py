"""The body check that keeps NUL and lone surrogates (text no store can hold) out of every route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from backend.server.errors import install_error_handlers
from backend.server.text_guard import UNSTORABLE_TEXT, TextGuard, has_unstorable_text


@pytest.mark.parametrize(
    ("body", "unstorable"),
    [
        (b'{"message": "plain text"}', False),
        (b'{"message": "\\ud83c\\udf4e apple"}', False),  # a surrogate pair is one character
        ('{"message": "🍎 raw UTF-8"}'.encode(), False),
        (b'{"message": "\\\\ud800 is how you write it"}', False),  # an escaped backslash: literal text
        (b'{"message": "\\\\u0000 likewise"}', False),
        (b'{"message": "bad \\ud800 text"}', True),
        (b'{"message": "low \\udc00 alone"}', True),
        (b'{"message": "swapped \\udf4e\\ud83c"}', True),
        (b'{"message": "nul \\u0000 inside"}', True),
        (b'{"metadata": {"\\ud800": 1}}', True),  # keys count too
        (b'{"metadata": {"deep": [[["\\u0000"]]]}}', True),
        (b'{"message": "\\ud800', False),  # not JSON: the route refuses it as malformed
        (b"[" * 100_000 + b'"\\ud800"' + b"]" * 100_000, False),  # too deep for any parser: refused there
    ],
)
def test_unstorable_text_is_found_wherever_it_is(body: bytes, unstorable: bool) -> None:
    assert has_unstorable_text(body) is unstorable


class Echo(BaseModel):
    message: str


def guarded_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/api/v1/echo")
    async def echo(body: Echo) -> dict[str, str]:
        return {"message": body.message}

    @app.post("/v1/echo")
    async def openai_echo(body: Echo) -> dict[str, str]:
        return {"message": body.message}

    app.add_middleware(TextGuard)
    return app


async def two_chunks() -> AsyncIterator[bytes]:
    yield b'{"message": "\\ud8'  # the escape split across chunks
    yield b'00"}'


async def test_the_guard_answers_400_in_the_paths_error_shape_before_the_route_runs() -> None:
    transport = httpx.ASGITransport(app=guarded_app())
    json_headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=json_headers) as http:
        fine = await http.post("/api/v1/echo", content=b'{"message": "\\ud83c\\udf4e"}')
        rest = await http.post("/api/v1/echo", content=b'{"message": "\\u0000"}')
        openai = await http.post("/v1/echo", content=b'{"message": "\\ud800"}')
        chunked = await http.post("/api/v1/echo", content=two_chunks())
    assert fine.json() == {"message": "🍎"}
    assert rest.status_code == 400
    assert rest.json() == {"error": {"code": "invalid_request", "message": UNSTORABLE_TEXT}}
    assert openai.status_code == 400 and openai.json()["error"]["type"] == "invalid_request_error"
    assert chunked.status_code == 400 and json.loads(chunked.text)["error"]["message"] == UNSTORABLE_TEXT
