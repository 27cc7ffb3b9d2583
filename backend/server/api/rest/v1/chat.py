"""POST /api/v1/chat and POST /api/v1/chat/stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi import APIRouter, Response

from backend.application.chat.turns import PreparedTurn
from backend.application.services import ServiceContainer
from backend.domain.context import RequestContext
from backend.domain.events import INTERNAL_KINDS
from backend.server.api_responses import errors, sse_example, sse_response
from backend.server.deps import ConfigDep, PrincipalDep, RequestIdDep, ServicesDep
from backend.server.models.requests import ChatRequest
from backend.server.models.responses import ChatResponse
from backend.server.models.stream_events import StreamEventNormalizer
from backend.server.sse import EventStreamResponse, event_stream

router = APIRouter(prefix="/api/v1", tags=["chat"])

STREAM_DESCRIPTION = (
    "The turn's events (docs/events.md), one `data: {json}` line each, and a `: ping` comment while idle: `start`, "
    "`progress` (routing, each retrieval, generation), `token` deltas, `reasoning`, `citations`, `execution_log` "
    "(with `debug`), `error` (a failure after the stream opened), and `done` last."
)
STREAM_EXAMPLE = sse_example(
    {"status": "start", "seq": 0},
    {"status": "token", "content": "Wrenfield Orchard presses its cider in October [1].", "seq": 6},
    {
        "status": "citations",
        "content": [
            {
                "id": "chunk:1",
                "title": "Cider",
                "doc_id": "d1",
                "chunk_id": "c1",
                "snippet": "Pressed in October",
            }
        ],
        "consulted": [],
        "seq": 8,
    },
    {"status": "done", "message_id": "5b7e0c1d", "seq": 9},
    common={"request_id": "6f0c9a2e41d7", "ts": 1795650001.004},
)


def _context(body: ChatRequest, principal: PrincipalDep, request_id: str, config: ConfigDep) -> RequestContext:
    return RequestContext(
        request_id=request_id,
        user_id=principal.resolve_user(body.user_id),
        session_id=body.session_id,
        debug_level=body.debug_level(config.debug_level),
    )


@router.post("/chat", response_model=ChatResponse, responses=errors(400, 404, 409, 501, 502, 504))
async def chat(
    body: ChatRequest,
    services: ServicesDep,
    config: ConfigDep,
    principal: PrincipalDep,
    request_id: RequestIdDep,
    response: Response,
) -> ChatResponse:
    context = _context(body, principal, request_id, config)
    result = await services.chat.handle(context, body.to_input())
    response.headers["X-Request-ID"] = request_id
    return ChatResponse.of(result, body.session_id, request_id)


async def _frames(services: ServiceContainer, turn: PreparedTurn) -> AsyncIterator[bytes]:
    normalizer = StreamEventNormalizer(turn.context.request_id)
    # aclosing: when the client goes away, the use case's generator is closed now, not at GC time,
    # so its partial answer is stored promptly.
    async with aclosing(services.stream.events(turn)) as events:
        async for event in events:
            if event.kind not in INTERNAL_KINDS:  # the route and retrievals show as progress (and debug) events
                yield normalizer.frame(event)


@router.post(
    "/chat/stream",
    response_class=EventStreamResponse,
    responses={
        200: sse_response(STREAM_DESCRIPTION, "ChatStreamEvent", STREAM_EXAMPLE),
        **errors(400, 404, 409, 501),
    },
)
async def chat_stream(
    body: ChatRequest, services: ServicesDep, config: ConfigDep, principal: PrincipalDep, request_id: RequestIdDep
) -> EventStreamResponse:
    context = _context(body, principal, request_id, config)
    # Validation and the user message happen before the stream opens: bad input is a plain 4xx.
    turn = await services.stream.prepare(context, body.to_input())
    return event_stream(_frames(services, turn), config.sse_heartbeat_s, {"X-Request-ID": request_id})
