"""One facade request as a chat turn, whichever endpoint it came to: the model, the conversation and the session are
resolved here once, and the turn is then answered whole or streamed through one encoder per wire format.

The order is the one every endpoint keeps: the model, then the messages, then the session, all before anything is
stored; a problem with any of them is a plain 4xx.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Request

from backend.application.chat.chat_handler import ChatResult
from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import PreparedTurn
from backend.application.services import ServiceContainer
from backend.domain.context import RequestContext
from backend.domain.events import StreamEvent
from backend.server.api.openai_facade.catalog import available_models, find_model
from backend.server.api.openai_facade.conversation import (
    WireMessage,
    conversation_of,
    derived_session_id,
    explicit_session_id,
)
from backend.server.auth import Principal
from backend.server.sse import EventStreamResponse, event_stream


class FrameEncoder(Protocol):
    """A wire format's encoder of one request's events."""

    def frame(self, event: StreamEvent) -> bytes:
        """The bytes to send for this event; empty when the event has no place in the protocol."""
        ...


@dataclass(frozen=True, slots=True)
class FacadeTurn:
    model: str  # the model id as the request named it
    context: RequestContext
    chat_input: ChatInput
    base_url: str  # the URL the request came in on: citations link to documents under it
    created: int  # Unix seconds

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Request-ID": self.context.request_id, "X-Session-ID": self.context.session_id}


async def resolve_turn(
    services: ServiceContainer,
    request: Request,
    principal: Principal,
    request_id: str,
    *,
    model_id: str,
    messages: Callable[[], Sequence[WireMessage]],
    field: str,
    metadata: Mapping[str, Any] | None,
    end_user: str | None,
) -> FacadeTurn:
    """The turn a request asks for. `messages` reads the request's messages (once the model is found); `field`
    names them in the request, for errors."""
    model = find_model(await available_models(services), model_id)
    conversation = conversation_of(messages(), field)
    # Credentials decide who is asking; `user` is OpenAI's end-user tag and only tells sessions apart.
    user_id = principal.resolve_user(None)
    session_id = explicit_session_id(request.headers, metadata) or derived_session_id(
        user_id, model.id, end_user, conversation.opening
    )
    chat_input = ChatInput(
        session_id=session_id,
        message=conversation.question,
        kb_prefix=model.kb_prefix,
        agent_type=model.agent_type,
        history=conversation.history,
    )
    context = RequestContext(request_id=request_id, user_id=user_id, session_id=session_id)
    return FacadeTurn(model_id, context, chat_input, str(request.base_url), int(time.time()))


async def answer(services: ServiceContainer, turn: FacadeTurn) -> ChatResult:
    return await services.chat.handle(turn.context, turn.chat_input)


async def stream(
    services: ServiceContainer, turn: FacadeTurn, encoder: FrameEncoder, heartbeat_s: float
) -> EventStreamResponse:
    # Validation and the user message happen before the stream opens: bad input is a plain 4xx.
    prepared = await services.stream.prepare(turn.context, turn.chat_input)
    return event_stream(_frames(services, prepared, encoder), heartbeat_s, turn.headers)


async def _frames(services: ServiceContainer, turn: PreparedTurn, encoder: FrameEncoder) -> AsyncIterator[bytes]:
    # aclosing: when the client goes away, the use case's generator is closed now, not at GC time,
    # so its partial answer is stored promptly.
    async with aclosing(services.stream.events(turn)) as events:
        async for event in events:
            if frame := encoder.frame(event):
                yield frame
