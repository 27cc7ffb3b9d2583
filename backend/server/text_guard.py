"""Refuse JSON bodies whose text is not valid Unicode: an unpaired UTF-16 surrogate escape (`"\\ud800"`).

JSON allows writing such an escape and Python's parser turns it into a `str` that can never be encoded again,
so it would fail much later — in a store's driver, in the response's JSON encoder, in the middle of a stream —
as a 500 or a cut stream, possibly after the user message was stored. Checked here, before any route sees the
body, it is one clear 400 and nothing is written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Any surrogate or NUL escape at all; bodies without one (nearly all) skip the parse below. (A raw NUL byte
# inside a JSON string is already invalid JSON.)
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_TEXT = (
    "the request body contains text that cannot be stored: a NUL character (\\u0000) "
    "or an unpaired UTF-16 surrogate (\\ud800-\\udfff)"
)


def has_unstorable_text(body: bytes) -> bool:
    """Whether parsing `body` as JSON yields a string (or key) with NUL or a lone surrogate. Surrogate pairs
    decode to one character and are fine; a body that is not JSON is left to the route, which refuses it."""
    if not _SUSPECT_ESCAPE.search(body):
        return False
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return False
    pending: list[Any] = [parsed]
    while pending:  # iterative: a deeply nested body must not exhaust the stack here
        value = pending.pop()
        if isinstance(value, str):
            if _UNSTORABLE.search(value):
                return True
        elif isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return False


def _is_form(scope: Scope) -> bool:
    content_type: bytes = dict(scope["headers"]).get(b"content-type", b"")
    return content_type.lower().startswith((b"multipart/", b"application/x-www-form-urlencoded"))


class TextGuard:
    """Pure ASGI: checks the body when the route has read all of it (FastAPI reads JSON bodies whole)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_form(scope):  # uploads are bytes; their loaders decode them
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
                    if has_unstorable_text(body):
                        # Raised while the route reads its body; FastAPI passes an HTTPException on (any other
                        # exception there becomes a vague "error parsing the body"), the handlers render it.
                        raise HTTPException(400, UNSTORABLE_TEXT)
            return message

        await self.app(scope, checking_receive, send)
