"""HEAD served as its GET, without a server that drops HEAD bodies itself (httpx's ASGI transport keeps them)."""

from __future__ import annotations

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.server.head import HeadAsGet


def echoing_method(seen: list[str]) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["method"])
        body = f"answered {scope['method']}".encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def test_a_head_is_served_as_its_get_with_the_gets_headers_and_no_body() -> None:
    seen: list[str] = []
    transport = httpx.ASGITransport(app=HeadAsGet(echoing_method(seen)))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        head = await http.head("/anything")
        get = await http.get("/anything")
        post = await http.post("/anything")
    assert seen == ["GET", "GET", "POST"]
    assert head.status_code == 200 and head.content == b""
    assert head.headers == get.headers and get.text == "answered GET"
    assert post.text == "answered POST"
