"""The API's page, /docs (Swagger UI), with its script and styles served from the installed fastapi-offline package
(its copy of Swagger UI 5): the page renders without a CDN, offline. There is no /redoc: ReDoc's page fetches its
logo from its vendor's CDN."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"


def install(app: FastAPI) -> None:
    """The page and its assets; the app is created with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS_PATH, StaticFiles(directory=Path(str(resources.files("fastapi_offline") / "static"))))
    app.add_route("/docs", swagger_ui, include_in_schema=False)


def _urls(request: Request) -> tuple[str, str]:
    """The schema's URL and the assets' prefix, under the prefix a proxy mounts the app at."""
    root = str(request.scope.get("root_path", ""))
    return root + request.app.openapi_url, root + ASSETS_PATH


async def swagger_ui(request: Request) -> HTMLResponse:
    openapi, assets = _urls(request)
    return get_swagger_ui_html(
        openapi_url=openapi,
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=f"{assets}/favicon.png",
        oauth2_redirect_url=None,
    )
