"""Reject request bodies over the limit with a JSON 413, before anything is parsed or stored."""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.server.errors import error_response


class BodySizeLimit:
    """Pure ASGI: checks Content-Length up front, and counts the bytes of chunked bodies as they arrive."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limit_for(scope["path"])
        too_large = f"the request body is larger than {max_bytes} bytes"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            response = error_response(scope["path"], 413, "payload_too_large", too_large)
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    # Raised while the route reads its body; the HTTP error handler renders it as JSON.
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, counting_receive, send)
