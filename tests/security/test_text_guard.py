"""The body check that keeps NUL and lone surrogates (text no store can hold) out of every route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from backend.domain.text import UnstorableText
from backend.server.errors import install_error_handlers
from backend.server.text_guard import TextGuard, check_body


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        (b"", None),
        (b'{"message": "plain text"}', None),
        (b'{"message": "\\ud83c\\udf4e apple"}', None),  # a surrogate pair is one character
        ('{"message": "🍎 raw UTF-8"}'.encode(), None),
        (b'{"message": "\\\\ud800 is how you write it"}', None),  # an escaped backslash: literal text
        (b'{"message": "\\\\u0000 likewise"}', None),
        (b'{"message": "bad \\ud800 text"}', "message contains an unpaired UTF-16 surrogate (U+D800)"),
        (b'{"message": "low \\udc00 alone"}', "message contains an unpaired UTF-16 surrogate (U+DC00)"),
        (b'{"message": "swapped \\udf4e\\ud83c"}', "message contains an unpaired UTF-16 surrogate"),
        (b'{"message": "nul \\u0000 inside"}', "message contains a NUL character (U+0000)"),
        (b'{"metadata": {"\\ud800": 1}}', "a key in metadata contains an unpaired UTF-16 surrogate"),
        (b'{"metadata": {"deep": [[["\\u0000"]]]}}', "metadata.deep[0][0][0] contains a NUL character"),
        (b'{"messages": [{"content": "ok"}, {"content": "\\u0000"}]}', "messages[1].content contains a NUL"),
        (b'"\\u0000"', "the body contains a NUL character"),
        (b'{"message": "\\ud800', None),  # not JSON: the route refuses it as malformed
        (b"[" * 100_000 + b'"\\ud800"' + b"]" * 100_000, None),  # too deep for any parser: refused there
        # Bytes that are not UTF-8, whatever a JSON parser would make of them.
        (b'{"message": "\xed\xa0\x80"}', "the request body is not UTF-8 text (invalid byte at offset 13)"),
        (b'{"message": "\xff"}', "the request body is not UTF-8 text"),
        ('{"message": "x"}'.encode("utf-16"), "the request body is not UTF-8 text"),
        ('{"message": "x"}'.encode("utf-16-le"), "the request body contains a NUL character"),
        ('{"message": "x"}'.encode("utf-32"), "the request body is not UTF-8 text"),
        ('{"message": "x"}'.encode("utf-32-be"), "the request body contains a NUL character"),
        (b'{"message": "raw \x00 byte"}', "the request body contains a NUL character"),
    ],
)
def test_the_body_check_names_what_no_store_can_hold(body: bytes, refused: str | None) -> None:
    if refused is None:
        check_body(body)
        return
    with pytest.raises(UnstorableText) as raised:
        check_body(body)
    assert raised.value.message.startswith(refused)


def test_a_utf8_bom_is_not_text() -> None:
    check_body(b'\xef\xbb\xbf{"message": "x"}')


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
    assert rest.json() == {
        "error": {
            "code": "unstorable_text",
            "message": "message contains a NUL character (U+0000), which cannot be stored",
        }
    }
    assert openai.status_code == 400 and openai.json()["error"]["type"] == "invalid_request_error"
    assert openai.json()["error"]["code"] == "unstorable_text"
    assert chunked.status_code == 400 and "U+D800" in json.loads(chunked.text)["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"message": "\xed\xa0\x80"}',
        '{"message": "\u0000"}'.encode("utf-16"),
        '{"message": "\u0000"}'.encode("utf-16-le"),
        '{"message": "ok"}'.encode("utf-32"),
    ],
)
async def test_bodies_in_other_encodings_or_with_raw_surrogates_never_reach_the_route(body: bytes) -> None:
    transport = httpx.ASGITransport(app=guarded_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        answer = await http.post("/api/v1/echo", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "unstorable_text"
