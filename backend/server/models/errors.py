"""The error bodies, as the API description shows them (backend/server/errors.py writes them): this API's shape,
and OpenAI's for the routes under `/v1/`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(
        description="what went wrong, for programs: `validation_error`, `unknown_kb`, `rate_limited`, ..."
    )
    message: str = Field(
        description="what went wrong, for people; a 5xx says a fixed text of its code, never the cause"
    )
    request_id: str | None = Field(
        None, description="5xx only: the request's id, also in the `X-Request-ID` header and the server's log line"
    )


class ErrorResponse(BaseModel):
    """Every error of every route outside `/v1/`."""

    error: ErrorDetail


class OpenAIError(BaseModel):
    message: str
    type: Literal[
        "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error", "server_error"
    ]
    param: str | None = Field(description="the request field the error is about, e.g. `model` or `messages[0].role`")
    code: str = Field(description="what went wrong, for programs: `model_not_found`, `validation_error`, ...")
    request_id: str | None = Field(None, description="5xx only: the request's id, also in the `X-Request-ID` header")


class OpenAIErrorResponse(BaseModel):
    """Every error of the routes under `/v1/`, in OpenAI's shape."""

    error: OpenAIError
