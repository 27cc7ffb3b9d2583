"""HEAD is answered wherever GET is: the same status and headers, no body.

Starlette's routes add HEAD to every GET route; FastAPI's API routes match only the methods they declare, so a
HEAD on `/health`, `/v1/models` or the history answered 405. Rather than declaring HEAD on each route (and
publishing a HEAD operation for each in the API description), a HEAD request is served as the GET it mirrors:
routed, authenticated and rate limited the same way, with its body left out.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Pure ASGI, in front of everything else, so every layer below sees the GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}  # Content-Length stays the GET's, as HEAD requires
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)
