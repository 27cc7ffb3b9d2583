"""The one place where domain errors become HTTP responses: `{"error": {"code", "message"}}`."""

from __future__ import annotations

import logging

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
    StoreUnavailable,
    Unauthenticated,
    UnknownKnowledgeBase,
)

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
    (BudgetExceeded, 504),  # the answer needed more model calls or time than a request may take
)


def status_for(error: GraphRagError) -> int:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return status
    return 500


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, GraphRagError)
    status = status_for(error)
    if status >= 500:
        logger.warning("%s %s → %d %s: %s", request.method, request.url.path, status, error.code, error.message)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(error.code, error.message), status_code=status, headers=headers)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = error.errors()
    if any(problem.get("type") == "json_invalid" for problem in problems):
        return JSONResponse(error_body("malformed_json", "the request body is not valid JSON"), status_code=400)
    details = "; ".join(
        f"{'.'.join(str(part) for part in problem.get('loc', ()) if part != 'body')}: {problem.get('msg', '')}"
        for problem in problems
    )
    return JSONResponse(error_body("validation_error", details or "invalid request"), status_code=422)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(error.status_code, "http_error")
    return JSONResponse(error_body(code, str(error.detail)), status_code=error.status_code, headers=error.headers)


async def _unexpected_error(request: Request, error: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(GraphRagError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
