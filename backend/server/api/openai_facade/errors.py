"""The facade's own errors. They are domain errors with the request field they are about (`param`), which
backend/server/errors.py puts into OpenAI's error shape; nothing here renders a response."""

from __future__ import annotations

from backend.domain.errors import InvalidRequest, NotFound


class ModelNotFound(NotFound):
    code = "model_not_found"

    def __init__(self, model: str) -> None:
        super().__init__(f"the model {model!r} does not exist; GET /v1/models lists the available models")
        self.param = "model"


class InvalidMessages(InvalidRequest):
    code = "invalid_messages"

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class InvalidMetadata(InvalidRequest):
    code = "invalid_metadata"

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class UnsupportedParameter(InvalidRequest):
    code = "unsupported_parameter"

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param
