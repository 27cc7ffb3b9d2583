"""HEAD is answered wherever GET is, over real HTTP: the same status and headers, no body, and the same
authentication and rate limit. The GET routes come from the app itself, so a new one is covered the day it is
added."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from backend.bootstrap import GRAPH_DB
from tests.security.routes import concrete, every_route
from tests.support.live_server import LiveServer, live_server, make_settings

KEYS = {"alice": "head-alice-0123456789", "carol": "head-carol-0123456789"}
BURST = 40  # more than the route checks below need; carol empties hers on purpose
GET_ROUTES = sorted({path for method, path in every_route() if method == "GET"})
VARYING = {"date"}  # headers that may differ between two answers to the same request


def as_user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, orchard_knowledge: Path) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("head")
    shutil.copy(orchard_knowledge, data_dir / GRAPH_DB)
    settings = make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS=",".join(f"{key}={user}" for user, key in KEYS.items()),
        RATE_LIMIT_PER_MINUTE=1,
        RATE_LIMIT_BURST=BURST,
    )
    with live_server(settings) as running:
        yield running


@pytest.fixture
async def http(secured: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=secured.base_url, timeout=30) as client:
        yield client


def same_headers(head: httpx.Response, get: httpx.Response) -> bool:
    def kept(response: httpx.Response) -> dict[str, str]:
        return {name: value for name, value in response.headers.items() if name not in VARYING}

    return kept(head) == kept(get)


async def test_head_on_health_is_its_get_without_the_body(http: httpx.AsyncClient) -> None:
    get = await http.get("/health")
    head = await http.head("/health")
    assert head.status_code == get.status_code == 200
    assert head.content == b"" and get.json() == {"status": "ok"}
    assert head.headers["content-length"] == str(len(get.content))
    assert same_headers(head, get)


@pytest.mark.parametrize("path", ["/v1/models", "/api/v1/kbs"])
async def test_head_on_an_authenticated_route_needs_credentials_like_get(http: httpx.AsyncClient, path: str) -> None:
    head = await http.head(path, headers=as_user("alice"))
    get = await http.get(path, headers=as_user("alice"))
    anonymous = await http.head(path)
    wrong_key = await http.head(path, headers={"Authorization": "Bearer not-a-key"})
    assert head.status_code == get.status_code == 200
    assert head.content == b"" and get.content
    assert same_headers(head, get)
    assert anonymous.status_code == wrong_key.status_code == 401
    assert anonymous.content == b"" and anonymous.headers["www-authenticate"] == "Bearer"


def test_every_get_route_is_listed() -> None:
    assert {"/health", "/ready", "/", "/ui/", "/ui/{name}", "/v1/models", "/api/v1/kbs"} <= set(GET_ROUTES)
    assert "/api/v1/conversations/{session_id}/messages" in GET_ROUTES


@pytest.mark.parametrize("path", GET_ROUTES)
async def test_every_get_route_answers_head_as_it_answers_get(http: httpx.AsyncClient, path: str) -> None:
    url = concrete(path)
    get = await http.get(url, headers=as_user("alice"))
    head = await http.head(url, headers=as_user("alice"))
    assert head.status_code != 405
    assert head.status_code == get.status_code, (url, get.status_code, get.text[:300])
    assert head.content == b""
    assert same_headers(head, get), (url, dict(head.headers), dict(get.headers))


async def test_head_counts_against_the_same_rate_limit_as_get(http: httpx.AsyncClient) -> None:
    carol = as_user("carol")
    allowed = [(await http.head("/v1/models", headers=carol)).status_code for _ in range(BURST)]
    refused_get = await http.get("/v1/models", headers=carol)
    refused_head = await http.head("/v1/models", headers=carol)
    assert allowed == [200] * BURST
    assert refused_get.status_code == refused_head.status_code == 429
    assert refused_head.content == b"" and refused_head.headers["retry-after"] == refused_get.headers["retry-after"]
