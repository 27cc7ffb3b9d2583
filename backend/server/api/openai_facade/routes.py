"""GET /v1/models, GET /v1/models/{id} and POST /v1/chat/completions (docs/protocols/openai.md).

A completion is an ordinary chat turn: it goes through the same use cases as /api/v1/chat and
/api/v1/chat/stream, is stored under a session, and only its wire format differs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi import APIRouter, Request, Response

from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import PreparedTurn
from backend.application.services import ServiceContainer
from backend.domain.context import RequestContext
from backend.server.api.openai_facade.catalog import available_models, find_model
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.api.openai_facade.citations import annotations_for
from backend.server.api.openai_facade.conversation import (
    conversation_of,
    derived_session_id,
    explicit_session_id,
)
from backend.server.api.openai_facade.models import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    CompletionChoice,
    CompletionUsage,
    ModelCard,
    ModelList,
)
from backend.server.api_responses import errors, sse_example, sse_response
from backend.server.deps import ConfigDep, PrincipalDep, RequestIdDep, ServicesDep
from backend.server.sse import EventStreamResponse, event_stream

router = APIRouter(prefix="/v1", tags=["openai"])

STREAM_EXAMPLE = sse_example(
    {
        "id": "chatcmpl-6f0c9a2e41d7",
        "object": "chat.completion.chunk",
        "created": 1795650000,
        "model": "orchard/hybrid_agent",
        "choices": [
            {
                "index": 0,
                "delta": {"content": "Wrenfield Orchard presses its cider in October [1]."},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    },
    last_data="[DONE]",
)


@router.get("/models", response_model=ModelList)
async def list_models(services: ServicesDep, principal: PrincipalDep) -> ModelList:
    del principal  # any authenticated caller may list
    return ModelList(data=[model.card() for model in await available_models(services)])


@router.get(
    "/models/{model_id:path}", response_model=ModelCard, responses=errors(404)
)  # ids contain a slash: orchard/hybrid_agent
async def retrieve_model(model_id: str, services: ServicesDep, principal: PrincipalDep) -> ModelCard:
    del principal
    return find_model(await available_models(services), model_id).card()


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={
        200: sse_response(
            "The completion; with `stream: true`, its `chat.completion.chunk`s as SSE `data:` lines (an error after "
            'the stream opened is an `{"error": ...}` line), then `data: [DONE]`.',
            "ChatCompletionStreamData",
            STREAM_EXAMPLE,
            last_data="[DONE]",
        ),
        **errors(404, 409, 501, 502, 504),
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    response: Response,
    services: ServicesDep,
    config: ConfigDep,
    principal: PrincipalDep,
    request_id: RequestIdDep,
) -> ChatCompletion | EventStreamResponse:
    model = find_model(await available_models(services), body.model)
    conversation = conversation_of(body.messages)
    # Credentials decide who is asking; `user` is OpenAI's end-user tag and only tells sessions apart.
    user_id = principal.resolve_user(None)
    session_id = explicit_session_id(request.headers, body.metadata) or derived_session_id(
        user_id, model.id, body.user, conversation.opening
    )
    context = RequestContext(request_id=request_id, user_id=user_id, session_id=session_id)
    chat_input = ChatInput(
        session_id=session_id,
        message=conversation.question,
        kb_prefix=model.kb_prefix,
        agent_type=model.agent_type,
        history=conversation.history,
    )
    headers = {"X-Request-ID": request_id, "X-Session-ID": session_id}
    completion_id, created, base_url = f"chatcmpl-{request_id}", int(time.time()), str(request.base_url)
    if body.stream:
        # Validation and the user message happen before the stream opens: bad input is a plain 4xx.
        turn = await services.stream.prepare(context, chat_input)
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = CompletionChunks(completion_id, created, body.model, base_url, include_usage)
        return event_stream(_frames(services, turn, chunks), config.sse_heartbeat_s, headers)
    result = await services.chat.handle(context, chat_input)
    response.headers.update(headers)
    annotations = annotations_for(result.answer, result.citations, result.consulted, result.route.kb_prefix, base_url)
    message = AssistantMessage(content=result.answer, annotations=annotations)
    return ChatCompletion(
        id=completion_id,
        created=created,
        model=body.model,
        choices=[CompletionChoice(message=message)],
        usage=CompletionUsage.of(result.usage),
    )


async def _frames(services: ServiceContainer, turn: PreparedTurn, chunks: CompletionChunks) -> AsyncIterator[bytes]:
    # aclosing: when the client goes away, the use case's generator is closed now, not at GC time,
    # so its partial answer is stored promptly.
    async with aclosing(services.stream.events(turn)) as events:
        async for event in events:
            if frame := chunks.frame(event):
                yield frame
