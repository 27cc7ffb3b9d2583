"""The built-in web chat page: three static files under /ui/ (no build step), `/` redirects there, and the graph
library it draws evidence with (vis-network, from the installed `pyvis` wheel).

Only the listed files are served, so no path from a request ever reaches the file system. The page
talks to the same origin's API; its Content-Security-Policy allows nothing else.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from importlib.util import find_spec
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException

router = APIRouter(tags=["web"], include_in_schema=False)

UI_PATH = "/ui/"
INDEX = "index.html"
CONTENT_TYPES = {
    INDEX: "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "vis-network.min.js": "text/javascript; charset=utf-8",
    "vis-network.css": "text/css; charset=utf-8",
}
# Where each file is read from: a package and the path inside it. vis-network ships inside the `pyvis` wheel,
# installed without its dependencies (scripts/lib/env.sh, Dockerfile); the page loads it only to draw a graph.
GRAPH_LIBRARY = ("pyvis", ("lib", "vis-9.1.2"))
SOURCES = {
    name: GRAPH_LIBRARY if name.startswith("vis-network") else ("backend.server", ("static",)) for name in CONTENT_TYPES
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
COMMON_HEADERS = {
    # The file names carry no version, so the browser revalidates each time (a 304 when unchanged).
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@cache
def load_asset(name: str) -> Asset:
    """One of the page's files, read once from the installed package."""
    package, folders = SOURCES[name]
    try:
        body = _package_folder(package).joinpath(*folders, name).read_bytes()
    except FileNotFoundError as error:
        raise HTTPException(status_code=404, detail=f"{name} is not installed (package {package})") from error
    return Asset(body, CONTENT_TYPES[name], '"' + hashlib.sha256(body).hexdigest()[:20] + '"')


def _package_folder(package: str) -> Traversable:
    """A package's files without importing it (pyvis's `__init__` imports the dependencies left out)."""
    if package == "backend.server":
        return resources.files(package)
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(package)
    return Path(next(iter(spec.submodule_search_locations)))


def _serve(request: Request, name: str) -> Response:
    asset = load_asset(name)
    headers = {**COMMON_HEADERS, "ETag": asset.etag}
    if name == INDEX:
        headers |= PAGE_HEADERS
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


@router.get("/")
async def root() -> RedirectResponse:
    # Relative, so the redirect still lands right behind a proxy that mounts the app under a prefix.
    return RedirectResponse(UI_PATH.lstrip("/"))


@router.get(UI_PATH)
async def page(request: Request) -> Response:
    return _serve(request, INDEX)


@router.get(UI_PATH + "{name}")
async def asset(request: Request, name: str) -> Response:
    if name not in CONTENT_TYPES:
        raise HTTPException(status_code=404, detail=f"no such file: {UI_PATH}{name}")
    return _serve(request, name)
