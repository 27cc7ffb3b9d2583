"""What routes say about their responses beyond their models: the error statuses their use cases raise, and the
events they stream. backend/server/api_description.py completes both in the API description."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

REF = "#/components/schemas/"

STATUS_TEXT = {
    400: "The request is refused: malformed JSON (`malformed_json`), text no store can hold (`unstorable_text`) or "
    "a value the service does not accept (`invalid_request`, `unknown_agent_type`, `invalid_worker_name`, ...).",
    401: "Missing or unknown API key (`unauthenticated`): send `Authorization: Bearer <key>` or `X-API-Key: <key>`.",
    403: "Only admins may do this (`forbidden`).",
    404: "Not found for this caller (`not_found`, `unknown_kb`, `model_not_found`): the knowledge base, document, "
    "ingestion job, conversation or model named by the request does not exist.",
    408: "The request body did not arrive within `HTTP_BODY_TIMEOUT_S` (`request_timeout`; when served by "
    "`graphrag serve`); the connection is closed.",
    409: "Conflict: the knowledge base exists (`conflict`), the request id (`X-Request-ID`, AG-UI `runId`) names "
    "another message (`request_id_reused`), or the conversation was cleared meanwhile (`conversation_cleared`).",
    413: "The request body is larger than {limit} bytes (`payload_too_large`), refused before it is parsed.",
    422: "The body or a parameter fails validation (`validation_error`); the message names the field.",
    429: "Too many requests (`rate_limited`): at most {per_minute} a minute per caller, in bursts of {burst}; "
    "retry after `Retry-After` seconds.",
    501: "The agent type is not available in this deployment (`agent_unavailable`).",
    502: "The language model failed (`model_error`) or every retrieval failed (`retrieval_failed`).",
    503: "A store is unavailable (`store_unavailable`) or the server is shutting down (`shutting_down`); try again "
    "shortly.",
    504: "The request needed more model calls or time than one request may use (`budget_exceeded`).",
}
OPENAI_VALIDATION_TEXT = (
    "The request is refused: malformed JSON (`malformed_json`), a body that fails validation (`validation_error`, "
    "`param` names the field), unusable messages (`invalid_messages`) or a value the service does not accept "
    "(`invalid_request`, ...)."
)
HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "whole seconds until a request is allowed", "schema": {"type": "integer"}}},
}
REQUEST_ID_HEADER = {"X-Request-ID": {"description": "the request's id, as in the body", "schema": {"type": "string"}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for the error statuses a route's use case raises; their bodies are filled in by `install`."""
    return {status: {"description": STATUS_TEXT[status]} for status in statuses}


def sse_response(
    description: str, event_schema: str, example: str, last_data: str | None = None, named: bool = False
) -> dict[str, Any]:
    """A `text/event-stream` response whose `data:` lines are JSON described by the component `event_schema`
    (FastAPI's own way of describing a stream: one item per event), and maybe a last line that is not JSON;
    `named`: each event also has an `event:` line, the `type` of its data."""
    data: dict[str, Any] = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"$ref": REF + event_schema},
    }
    if last_data is not None:
        data = {"anyOf": [data, {"const": last_data}]}
    item: dict[str, Any] = {"type": "object", "required": ["data"], "properties": {"data": data}}
    if named:
        item["required"] = ["event", "data"]
        item["properties"] = {"event": {"type": "string", "description": "the `type` of its data"}, "data": data}
    return {"description": description, "content": {"text/event-stream": {"itemSchema": item, "example": example}}}


def sse_example(
    *events: Mapping[str, Any], common: Mapping[str, Any] | None = None, last_data: str = "", named: bool = False
) -> str:
    """A stream as it is sent: one `data:` line per event (each with the `common` fields, and with `named` after an
    `event:` line of its `type`), maybe a last line."""
    frames = []
    for event in events:
        data = json.dumps({**event, **(common or {})}, separators=(",", ":"))
        frames.append(f"event: {event['type']}\ndata: {data}\n\n" if named else f"data: {data}\n\n")
    return "".join(frames) + (f"data: {last_data}\n\n" if last_data else "")
