"""The API description (/openapi.json) as the server really answers, for the configuration it runs with.

FastAPI describes what it can see: the routes' parameters, bodies and response models. What the rest of the
server adds is described here, once, after FastAPI has written its part:

- the error body of every status an operation can answer, in the shape of its path (backend/server/errors.py):
  the statuses a route's own use case raises are declared on the route (`responses=errors(404, 409)`, from
  backend/server/api_responses.py); those of
  the mechanisms every route shares are read from the route and the configuration — a JSON body (400, 413, 408),
  parameters that can fail validation (422, or 400 under `/v1/`), credentials (401 when auth is on), admin-only
  (403 when auth is on), the rate limit (429 when it is on), the stores (503);
- FastAPI's own validation error shape (`HTTPValidationError`), which this server never sends, is removed;
- the limits the server is configured with: the largest body of each route, the longest chat message;
- the events of the streams (`event_stream` on the route names the schema of their `data:` JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from pydantic import TypeAdapter

from backend.server.agui.wire import AguiEvent
from backend.server.api.openai_facade.models import ChatCompletionChunk
from backend.server.api.openai_facade.response_models import ResponseStreamEvent
from backend.server.api_responses import HEADERS, OPENAI_VALIDATION_TEXT, REF, REQUEST_ID_HEADER, STATUS_TEXT
from backend.server.config import ServerConfig
from backend.server.deps import get_admin, get_principal, get_services
from backend.server.errors import is_openai_path
from backend.server.models.errors import ErrorResponse, OpenAIErrorResponse
from backend.server.models.knowledge import IngestRequest
from backend.server.models.stream_events import ChatStreamEvent
from backend.server.rate_limit import is_limited

CHAT_TURN_BODIES = ("ChatRequest", "ChatCompletionRequest", "ResponseRequest", "RunAgentInput")
FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
# Bodies a route describes by hand (`openapi_extra`) and refers to as components: FastAPI does not collect them.
HAND_DESCRIBED_BODIES: dict[str, Any] = {"IngestRequest": IngestRequest}
# The `data:` JSON of each stream, by the name its route's `sse_response` gives it.
STREAM_EVENTS: dict[str, Any] = {
    "ChatStreamEvent": ChatStreamEvent,
    "AguiEvent": AguiEvent,
    "ChatCompletionStreamData": ChatCompletionChunk | OpenAIErrorResponse,
    "ResponseStreamData": ResponseStreamEvent,
}


def install(app: FastAPI, config: ServerConfig) -> None:
    """Serve the description of this app as configured (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(FastAPI.openapi(app), app, config)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def describe(description: dict[str, Any], app: FastAPI, config: ServerConfig) -> dict[str, Any]:
    components = description.setdefault("components", {}).setdefault("schemas", {})
    for name in FASTAPI_VALIDATION_SCHEMAS:
        components.pop(name, None)
    add_schemas(components, ErrorResponse=ErrorResponse, OpenAIErrorResponse=OpenAIErrorResponse)
    add_schemas(components, **HAND_DESCRIBED_BODIES, **STREAM_EVENTS)
    for path, route, operation in operations(app, description):
        _describe_errors(path, route, operation, config)
        if "requestBody" in operation:
            _describe_body_limits(path, operation["requestBody"], config)
    message = components["ChatRequest"]["properties"]["message"]
    message["maxLength"] = min(message["maxLength"], config.max_message_chars)
    return description


def operations(app: FastAPI, description: dict[str, Any]) -> Iterator[tuple[str, RouteContext, dict[str, Any]]]:
    """Each described operation: its path, the route that serves it (as included, with its router's prefix)."""
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and route.include_in_schema:
            path = str(route.path_format)
            for method in sorted(route.methods or ()):
                yield path, route, description["paths"][path][method.lower()]


def add_schemas(components: dict[str, Any], **types: Any) -> None:
    """Each type's JSON schema as a component of that name, with the models it refers to."""
    for name, type_ in types.items():
        schema = TypeAdapter(type_).json_schema(ref_template=REF + "{model}", mode="serialization")
        for def_name, definition in schema.pop("$defs", {}).items():
            _add_schema(components, def_name, definition)
        _add_schema(components, name, schema)


def _add_schema(components: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    if components.setdefault(name, schema) != schema:
        raise ValueError(f"two different schemas are named {name!r} in the API description")


def _describe_errors(path: str, route: RouteContext, operation: dict[str, Any], config: ServerConfig) -> None:
    responses: dict[str, Any] = operation["responses"]
    fastapi_422 = responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
    if fastapi_422.get("$ref") == REF + "HTTPValidationError":
        del responses["422"]
    openai = is_openai_path(path)
    schema = {"$ref": REF + ("OpenAIErrorResponse" if openai else "ErrorResponse")}
    for status in sorted(set(map(int, responses)) | shared_statuses(path, route, config)):
        if status < 400:
            continue
        response = responses.setdefault(str(status), {})
        if "content" in response:
            continue  # a body of the route's own (/ready's 503)
        text = OPENAI_VALIDATION_TEXT if openai and status == 400 else STATUS_TEXT[status]
        response["description"] = text.format(
            limit=config.limit_for(path),
            per_minute=config.rate_limit_per_minute,
            burst=config.rate_limit_burst,
        )
        response["content"] = {"application/json": {"schema": schema}}
        headers = HEADERS.get(status, REQUEST_ID_HEADER if status >= 500 else None)
        if headers:
            response["headers"] = headers
    operation["responses"] = dict(sorted(responses.items()))


def _describe_body_limits(path: str, body: dict[str, Any], config: ServerConfig) -> None:
    limits = [f"At most {config.limit_for(path)} bytes."]
    schemas = [media.get("schema", {}).get("$ref", "") for media in body["content"].values()]
    if any(schema.removeprefix(REF) in CHAT_TURN_BODIES for schema in schemas):
        limits.append(
            f"The question (`message`, or the last user message) may hold at most {config.max_message_chars} "
            "characters (`MAX_MESSAGE_CHARS`)."
        )
    body["description"] = " ".join([body.get("description", ""), *limits]).strip()


def shared_statuses(path: str, route: RouteContext, config: ServerConfig) -> set[int]:
    """The statuses the mechanisms every route shares can answer this route with."""
    calls = set(_dependency_calls(route.dependant))
    statuses = set()
    if route.body_field is not None:
        statuses |= {400, 408, 413}  # not JSON or not storable text; too slow; too large
    if route.body_field is not None or _has_checked_parameters(route.dependant):
        statuses.add(400 if is_openai_path(path) else 422)
    if config.auth_enabled and get_principal in calls:
        statuses.add(401)
    if config.auth_enabled and get_admin in calls:
        statuses.add(403)
    if config.rate_limit_per_minute > 0 and is_limited(path):
        statuses.add(429)
    if get_services in calls:
        statuses.add(503)
    return statuses


def _dependency_calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dependency in dependant.dependencies:
        if dependency.call is not None:
            yield dependency.call
        yield from _dependency_calls(dependency)


def _has_checked_parameters(dependant: Dependant) -> bool:
    """Whether a parameter can fail validation: any but a path parameter that is any string."""
    if dependant.query_params or dependant.header_params or dependant.cookie_params:
        return True
    if any(param.field_info.annotation is not str for param in dependant.path_params):
        return True
    return any(_has_checked_parameters(dependency) for dependency in dependant.dependencies)
