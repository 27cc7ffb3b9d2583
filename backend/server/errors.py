"""The one place where errors become HTTP responses.

Every route answers `{"error": {"code", "message"}}`, except the OpenAI-compatible facade (paths under `/v1/`),
which answers in OpenAI's shape `{"error": {"message", "type", "param", "code"}}` so that OpenAI SDKs and chat
front ends understand its errors. Status codes are the same for both.

A client reads an error's `public_message` (backend/domain/errors.py): a 4xx says what was wrong with the request,
a 5xx a fixed text per error class. A 5xx also names the request, in the body (`request_id`) and the
`X-Request-ID` header; the log line with its cause (host, driver error) carries the same id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from backend.domain.errors import (
    AgentUnavailable,
    BudgetExceeded,
    Conflict,
    Forbidden,
    GraphRagError,
    InvalidRequest,
    ModelError,
    NotFound,
    RetrievalFailed,
    ShuttingDown,
    StoreUnavailable,
    Unauthenticated,
    UnknownKnowledgeBase,
    error_type_for,
)
from backend.server.deps import request_id_of

logger = logging.getLogger(__name__)

# Most specific first: the first matching class decides the status.
STATUS_BY_ERROR: tuple[tuple[type[GraphRagError], int], ...] = (
    (UnknownKnowledgeBase, 404),
    (InvalidRequest, 400),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (Conflict, 409),
    (NotFound, 404),
    (AgentUnavailable, 501),
    (ModelError, 502),
    (RetrievalFailed, 502),
    (StoreUnavailable, 503),
    (ShuttingDown, 503),
    (BudgetExceeded, 504),  # the answer needed more model calls or time than a request may take
)


def status_for(error: GraphRagError) -> int:
    return status_for_type(type(error))


def status_for_type(error_type: type[GraphRagError]) -> int:
    return next((status for known, status in STATUS_BY_ERROR if issubclass(error_type, known)), 500)


def status_for_code(code: str) -> int:
    """The status of the error class with this `code`, for errors that travel as a code (in-stream events)."""
    return status_for_type(error_type_for(code))


def error_body(code: str, message: str, request_id: str | None = None) -> dict[str, dict[str, str]]:
    body = {"code": code, "message": message}
    if request_id is not None:
        body["request_id"] = request_id
    return {"error": body}


OPENAI_PATH_PREFIX = "/v1/"


def openai_error_type(status: int) -> str:
    """OpenAI's error `type` for a status (OpenAI itself says invalid_request_error for an unknown model)."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error" if status < 500 else "server_error"


def openai_error_body(
    status: int, code: str, message: str, param: str | None = None, request_id: str | None = None
) -> dict[str, dict[str, Any]]:
    body = {"message": message, "type": openai_error_type(status), "param": param, "code": code}
    if request_id is not None:
        body["request_id"] = request_id
    return {"error": body}


def is_openai_path(path: str) -> bool:
    return path == OPENAI_PATH_PREFIX.rstrip("/") or path.startswith(OPENAI_PATH_PREFIX)


def error_response(
    path: str,
    status: int,
    code: str,
    message: str,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> JSONResponse:
    """An error for a request to `path`, in the shape that path's clients read; with `request_id`, the body and
    the `X-Request-ID` header name the request."""
    if request_id is not None:
        headers = {**(headers or {}), "X-Request-ID": request_id}
    if is_openai_path(path):
        body = openai_error_body(status, code, message, param, request_id)
    else:
        body = error_body(code, message, request_id)
    return JSONResponse(body, status_code=status, headers=headers)


def _param_path(location: Sequence[int | str]) -> str:
    """`("body", "messages", 0, "role")` → `messages[0].role`, the way OpenAI names a request field."""
    path = ""
    for part in location:
        if part == "body":
            continue
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, GraphRagError)
    status = status_for(error)
    if status >= 500:
        # The cause (its message: host, driver error) is for the operator; the client gets the request id.
        request_id = request_id_of(request)
        logger.warning(
            "request %s: %s %s → %d %s: %s",
            request_id,
            request.method,
            request.url.path,
            status,
            error.code,
            error.message,
        )
        return error_response(request.url.path, status, error.code, error.public_message, request_id=request_id)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    # An error may name the request field it is about (the OpenAI facade's errors do).
    param = getattr(error, "param", None)
    return error_response(
        request.url.path,
        status,
        error.code,
        error.public_message,
        param=param if isinstance(param, str) else None,
        headers=headers,
    )


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = error.errors()
    if any(problem.get("type") == "json_invalid" for problem in problems):
        return error_response(request.url.path, 400, "malformed_json", "the request body is not valid JSON")
    details = "; ".join(
        f"{'.'.join(str(part) for part in problem.get('loc', ()) if part != 'body')}: {problem.get('msg', '')}"
        for problem in problems
    )
    # OpenAI answers a malformed request with 400; this API has always said 422.
    status = 400 if is_openai_path(request.url.path) else 422
    param = _param_path(problems[0].get("loc", ())) if problems else None
    return error_response(
        request.url.path, status, "validation_error", details or "invalid request", param=param or None
    )


_CODE_BY_STATUS = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    # An HTTPException raised on purpose may carry its own code (the text guard's refusals do).
    code = getattr(error, "code", None) or _CODE_BY_STATUS.get(error.status_code, "http_error")
    return error_response(request.url.path, error.status_code, code, str(error.detail), headers=error.headers)


async def _unexpected_error(request: Request, error: Exception) -> JSONResponse:
    request_id = request_id_of(request)
    logger.exception("request %s: unhandled error on %s %s", request_id, request.method, request.url.path)
    return error_response(request.url.path, 500, "internal_error", "internal server error", request_id=request_id)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(GraphRagError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
