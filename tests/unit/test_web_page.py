"""The web page's files are served with their content types and headers, and nothing else is
(tests/e2e/test_web_page.py drives the page itself in Chromium)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from backend.server import web
from backend.server.errors import install_error_handlers


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(web.router)
    with TestClient(app) as http:
        yield http


def test_the_page_and_its_assets_are_served_with_their_types_and_headers(client: TestClient) -> None:
    root = client.get("/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "ui/"
    assert client.get("/", follow_redirects=True).url.path == "/ui/"
    assert client.get("/ui", follow_redirects=True).url.path == "/ui/"

    page = client.get("/ui/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-cache"
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp
    # Only same-origin, relative assets; no inline script or style.
    references = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert sorted(r for r in references if not r.startswith("#")) == ["app.js", "data:,", "style.css"]
    assert "<script>" not in page.text and "<style" not in page.text and " style=" not in page.text

    for name, content_type in [("app.js", "text/javascript"), ("style.css", "text/css")]:
        asset = client.get(f"/ui/{name}")
        assert asset.status_code == 200
        assert asset.headers["content-type"] == f"{content_type}; charset=utf-8"
        assert asset.headers["x-content-type-options"] == "nosniff"
        assert asset.content
        again = client.get(f"/ui/{name}", headers={"if-none-match": asset.headers["etag"]})
        assert again.status_code == 304 and again.content == b""

    assert "innerHTML" not in client.get("/ui/app.js").text
    # The graph library, from the installed pyvis wheel (scripts/lib/env.sh installs it).
    for name, content_type, start in [
        ("vis-network.min.js", "text/javascript", "/**\r\n * vis-network"),
        ("vis-network.css", "text/css", ".vis-"),
    ]:
        library = client.get(f"/ui/{name}")
        assert library.status_code == 200 and library.headers["content-type"] == f"{content_type}; charset=utf-8"
        assert library.text.startswith(start)
    for missing in ("/ui/nope.js", "/ui/..%2Fweb.py", "/ui/%2E%2E/app.py"):
        response = client.get(missing)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
