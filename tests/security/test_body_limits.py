"""Every endpoint that takes a body refuses one over the limit with a JSON 413 in its API's error shape, whether
the size is declared (Content-Length) or only counted as a chunked body arrives, and stores nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.security.routes import concrete, every_route
from tests.support.live_server import LiveServer, live_server, make_settings

MAX_BODY = 2048
MAX_UPLOAD = 8192
BODY_ROUTES = sorted({(method, path) for method, path in every_route() if method in ("POST", "PUT", "PATCH")})


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("limits")
    with live_server(make_settings(data_dir, MAX_BODY_BYTES=MAX_BODY, MAX_UPLOAD_BYTES=MAX_UPLOAD)) as running:
        yield running


def limit_of(path: str) -> int:
    return MAX_UPLOAD if path.endswith("/documents") else MAX_BODY  # uploads have their own, larger limit


def oversized(path: str) -> bytes:
    """A well-formed JSON body just over the route's limit."""
    return b'{"session_id": "s-limit", "message": "' + b"x" * limit_of(path) + b'"}'


async def in_chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 1000):
        yield body[start : start + 1000]


def test_every_body_route_is_covered() -> None:
    assert len(BODY_ROUTES) >= 10
    assert {("POST", "/api/v1/chat"), ("POST", "/v1/chat/completions"), ("POST", "/api/v1/agui")} <= set(BODY_ROUTES)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
async def test_a_body_over_the_limit_is_413(limited: LiveServer, method: str, path: str, chunked: bool) -> None:
    body = oversized(path)
    content = in_chunks(body) if chunked else body
    async with httpx.AsyncClient(base_url=limited.base_url, timeout=30) as http:
        response = await http.request(
            method, concrete(path), content=content, headers={"content-type": "application/json"}
        )
        stored = await http.get("/api/v1/conversations/s-limit/messages")
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "payload_too_large"
    assert f"larger than {limit_of(path)} bytes" in error["message"]
    if path.startswith("/v1/"):
        assert error["type"] == "invalid_request_error"
    assert stored.status_code == 404


async def test_an_upload_under_its_own_limit_is_not_held_to_the_json_limit(limited: LiveServer) -> None:
    files = [("files", ("notes.md", b"# Pressing\n\n" + b"Cider is pressed in October. " * 150, "text/markdown"))]
    async with httpx.AsyncClient(base_url=limited.base_url, timeout=60) as http:
        response = await http.post("/api/v1/kbs/orchard/documents?wait=true", files=files)
    assert MAX_BODY < len(files[0][1][1]) < MAX_UPLOAD
    assert response.status_code == 201, response.text
