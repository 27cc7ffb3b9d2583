"""Every route the app serves, read from the app itself, so security tests cover an endpoint the day it is added."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from backend.server import web
from backend.server.app import create_app
from backend.server.config import ServerConfig

PATH_VALUES = {
    "session_id": "s1",
    "kb_prefix": "orchard",
    "doc_id": "d1",
    "agent_type": "graph_agent",
    "model_id": "orchard/graph_agent",
    "name": "app.js",
    "path": "swagger-ui.css",
}


def no_services() -> Any:
    raise AssertionError("describing the API opens nothing")


def api_description() -> dict[str, Any]:
    """What the served app publishes at /openapi.json (building it needs no service)."""
    return create_app(no_services, ServerConfig()).openapi()


def every_route() -> list[tuple[str, str]]:
    """(method, path template): the API's operations, the web page's routes (kept out of the description), and
    the description's own pages and their assets."""
    app = create_app(no_services, ServerConfig())
    found = [(method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item]
    for route in [*web.router.routes, *app.routes]:
        if isinstance(route, APIRoute | Route):
            found += [(method, route.path) for method in sorted(route.methods or ()) if method != "HEAD"]
        elif isinstance(route, Mount):
            found.append(("GET", route.path + "/{path}"))
    return found


def concrete(path: str) -> str:
    """A path template with a plausible value for each parameter."""
    for name, value in PATH_VALUES.items():
        path = path.replace(f"{{{name}}}", value).replace(f"{{{name}:path}}", value)
    return path
