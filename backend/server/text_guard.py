"""Every request body passes the one text check (backend/domain/text.py) before a route sees it.

A body must be UTF-8 without NUL characters (JSON text exchanged between systems is UTF-8, RFC 8259 §8.1;
Python's JSON parser would otherwise accept UTF-16 and UTF-32 bodies, and encoded surrogates). A JSON body
must not hold a NUL or an unpaired surrogate written as an escape (`"\\ud800"`): Python's parser turns that
into a `str` that can never be encoded again, so it would fail much later — in a store's driver, in the
response's JSON encoder, in the middle of a stream — as a 500 or a cut stream, possibly after the user message
was stored. Checked here, it is one 400 naming the field, and nothing is written. Multipart bodies are left to
the routes, which check each uploaded file and its name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.domain.text import UnstorableText, check_text, decode_text

# A NUL or surrogate escape; bodies without one (nearly all) skip the parse below.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


def check_body(body: bytes) -> None:
    """Raise `UnstorableText` naming what in `body` no store can hold. A UTF-8 body that is not JSON is left to
    the route, which refuses it as malformed."""
    if not body:
        return
    text = decode_text(body, "the request body")
    if not _SUSPECT_ESCAPE.search(text):
        return
    try:
        parsed: Any = json.loads(text)
    except (ValueError, RecursionError):
        return
    check_text(parsed, "")


class RefusedBody(HTTPException):
    """Raised while a route reads its body: FastAPI passes an HTTPException on (any other exception there becomes
    a vague "error parsing the body"), and the error handlers render it with the refusal's `code`."""

    def __init__(self, error: UnstorableText) -> None:
        super().__init__(400, error.message)
        self.code = error.code


def _is_form(scope: Scope) -> bool:
    content_type: bytes = dict(scope["headers"]).get(b"content-type", b"")
    return content_type.lower().startswith((b"multipart/", b"application/x-www-form-urlencoded"))


class TextGuard:
    """Pure ASGI: checks the body when the route has read all of it (FastAPI reads JSON bodies whole)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_form(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def checking_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    body = b"".join(chunks)
                    chunks.clear()
                    try:
                        check_body(body)
                    except UnstorableText as error:
                        raise RefusedBody(error) from None
            return message

        await self.app(scope, checking_receive, send)
