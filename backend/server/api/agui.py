"""POST /api/v1/agui: the chat turn in the AG-UI protocol 1.0 (docs/protocols/agui.md).

The body is a `RunAgentInput`; the response is the run's AG-UI events over SSE. Validation and the user message
happen before the stream opens, so bad input is a plain 4xx. `/api/v1/agui/{kb}` and `/api/v1/agui/{kb}/{agent}`
bind the endpoint to a KB (and agent), for front ends that configure one agent URL per assistant.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Body, Depends, Request

from backend.application.chat.turns import PreparedTurn
from backend.application.services import ServiceContainer
from backend.domain.context import RequestContext
from backend.domain.debug import DebugLevel
from backend.server.agui.inputs import run_from_input
from backend.server.agui.translator import AguiTranslator, encode
from backend.server.api_responses import errors, sse_example, sse_response
from backend.server.deps import ConfigDep, PrincipalDep, ServicesDep, use_request_id
from backend.server.models.requests import AGENT_TYPE_SCHEMA
from backend.server.sse import EventStreamResponse, event_stream

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1", tags=["ag-ui"])

STREAM_EXAMPLE = sse_example(
    {"type": "RUN_STARTED", "threadId": "orchard-visit", "runId": "run-0001", "protocolVersion": "1.0"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "run-0001-answer", "delta": "Wrenfield Orchard presses its cider."},
    {"type": "RUN_FINISHED", "threadId": "orchard-visit", "runId": "run-0001", "result": {"message_id": "5b7e0c1d"}},
    common={"timestamp": 1795650000101},
)
STREAM_FAILED = "the run's event stream failed; what was generated so far has been kept"


async def _frames(services: ServiceContainer, turn: PreparedTurn, translator: AguiTranslator) -> AsyncIterator[bytes]:
    # aclosing: a client that goes away closes the use case's generator now, so its partial answer is stored.
    async with aclosing(services.stream.events(turn)) as events:
        try:
            async for event in events:
                for frame in translator.frames(event):
                    yield frame
        except Exception:
            # The use case turns its own failures into error events; this is a last resort so the client
            # still sees the run end (RUN_ERROR) instead of a cut stream.
            logger.exception("AG-UI run %s failed", translator.run_id)
            for closing in translator.abort(STREAM_FAILED, "internal_error"):
                yield encode(closing)


class _Run:
    """The run of one AG-UI request: what every endpoint needs besides its body and its path (a dependency)."""

    def __init__(self, request: Request, services: ServicesDep, config: ConfigDep, principal: PrincipalDep) -> None:
        self._request = request
        self._services = services
        self._config = config
        self._principal = principal

    async def __call__(
        self, body: RunAgentInput, kb_prefix: str | None = None, agent_type: str | None = None
    ) -> EventStreamResponse:
        run = run_from_input(body, kb_prefix, agent_type)
        # runId names the request when it can (logs, stored message, error responses); the events echo it as sent.
        request_id = use_request_id(self._request, body.run_id)
        context = RequestContext(
            request_id=request_id,
            user_id=self._principal.resolve_user(run.props.user_id),
            session_id=run.chat_input.session_id,
            debug_level=DebugLevel.requested(run.props.debug, self._config.debug_level),
        )
        turn = await self._services.stream.prepare(context, run.chat_input)
        translator = AguiTranslator(thread_id=body.thread_id, run_id=body.run_id)
        frames = _frames(self._services, turn, translator)
        return event_stream(frames, self._config.sse_heartbeat_s, {"X-Request-ID": request_id})


RunDep = Annotated[_Run, Depends()]

_QUESTION = {"id": "msg-1", "role": "user", "content": "When does Wrenfield Orchard press its cider?"}
_RUN = {"threadId": "orchard-visit-1", "runId": "run-0001", "state": {}, "tools": [], "context": []}
RunInput = Annotated[
    RunAgentInput,
    Body(
        openapi_examples={
            "question": {
                "summary": "a question; the router picks the KB and agent (or the endpoint's path names them)",
                "value": {**_RUN, "messages": [_QUESTION], "forwardedProps": {}},
            },
            "pinned": {
                "summary": "/api/v1/agui: the KB and agent named in forwardedProps",
                "value": {
                    **_RUN,
                    "messages": [_QUESTION],
                    "forwardedProps": {"kb": "orchard", "agent": "hybrid_agent"},
                },
            },
        }
    ),
]

_STREAM: dict[int | str, dict[str, Any]] = {
    200: sse_response(
        "The run's AG-UI 1.0 events (docs/protocols/agui.md), one `data: {json}` line each, and a `: ping` comment "
        "while idle; the run ends with `RUN_FINISHED` or `RUN_ERROR`.",
        "AguiEvent",
        STREAM_EXAMPLE,
    ),
    **errors(404, 409, 501),
}


@router.post("/agui", response_class=EventStreamResponse, responses=_STREAM)
async def agui(body: RunInput, run: RunDep) -> EventStreamResponse:
    return await run(body)


@router.post("/agui/{kb_prefix}", response_class=EventStreamResponse, responses=_STREAM)
async def agui_for_kb(kb_prefix: str, body: RunInput, run: RunDep) -> EventStreamResponse:
    return await run(body, kb_prefix)


@router.post("/agui/{kb_prefix}/{agent_type}", response_class=EventStreamResponse, responses=_STREAM)
async def agui_for_agent(
    kb_prefix: str, agent_type: Annotated[str, AGENT_TYPE_SCHEMA], body: RunInput, run: RunDep
) -> EventStreamResponse:
    return await run(body, kb_prefix, agent_type)
