"""FastAPI dependencies as `Annotated` aliases; everything comes from the app's lifespan state.

They are `async def` although none awaits: FastAPI runs plain `def` dependencies in its thread pool,
which cost about a millisecond per request for nothing.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from fastapi import Depends, Request

from backend.application.services import ServiceContainer
from backend.server.auth import Principal, authenticate
from backend.server.config import ServerConfig

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
_REQUEST_ID_STATE = "request_id"


async def get_services(request: Request) -> ServiceContainer:
    services: ServiceContainer = request.state.services
    return services


async def get_config(request: Request) -> ServerConfig:
    config: ServerConfig = request.app.state.server_config
    return config


async def get_principal(request: Request, config: Annotated[ServerConfig, Depends(get_config)]) -> Principal:
    return authenticate(request, config)


async def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_admin()
    return principal


def request_id_from(supplied: str) -> str:
    """A caller's request id when well-formed (retries then stay idempotent), else a new one."""
    return supplied if _REQUEST_ID.fullmatch(supplied) else uuid.uuid4().hex


def use_request_id(request: Request, supplied: str) -> str:
    """Name the request by `supplied` (when well-formed, else a new id), for the route and its error responses."""
    request_id = request_id_from(supplied)
    setattr(request.state, _REQUEST_ID_STATE, request_id)
    return request_id


def request_id_of(request: Request) -> str:
    """The request's id, the same for the route, its logs and its error response: the one a route chose, else the
    caller's X-Request-ID when well-formed, else a new one."""
    known = getattr(request.state, _REQUEST_ID_STATE, None)
    if isinstance(known, str):
        return known
    return use_request_id(request, request.headers.get("x-request-id", ""))


async def get_request_id(request: Request) -> str:
    """The caller's X-Request-ID when well-formed, else a new one."""
    return request_id_of(request)


ServicesDep = Annotated[ServiceContainer, Depends(get_services)]
ConfigDep = Annotated[ServerConfig, Depends(get_config)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
RequestIdDep = Annotated[str, Depends(get_request_id)]
AdminDep = Annotated[Principal, Depends(get_admin)]
