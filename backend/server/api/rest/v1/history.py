"""Conversation history: list the caller's messages, clear a conversation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from backend.server.api_responses import errors
from backend.server.deps import PrincipalDep, ServicesDep
from backend.server.models.requests import ClearRequest
from backend.server.models.responses import ClearResponse, MessageOut, MessagesResponse

router = APIRouter(prefix="/api/v1", tags=["history"])


@router.get("/conversations/{session_id}/messages", response_model=MessagesResponse, responses=errors(400, 404))
async def list_messages(
    session_id: str,
    services: ServicesDep,
    principal: PrincipalDep,
    limit: Annotated[int | None, Query(ge=1, le=200)] = None,
    before: Annotated[str | None, Query(max_length=64, description="message id: only older messages")] = None,
    user_id: Annotated[str | None, Query(max_length=128, description="development mode only")] = None,
) -> MessagesResponse:
    user = principal.resolve_user(user_id)
    messages = await services.history.list_messages(user, session_id, limit=limit, before=before)
    return MessagesResponse(session_id=session_id, messages=[MessageOut.of(m) for m in messages])


@router.post("/clear", response_model=ClearResponse)
async def clear(body: ClearRequest, services: ServicesDep, principal: PrincipalDep) -> ClearResponse:
    user = principal.resolve_user(body.user_id)
    cleared = await services.history.clear(user, body.session_id)
    return ClearResponse(cleared_messages=cleared)
