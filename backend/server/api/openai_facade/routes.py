"""GET /v1/models, GET /v1/models/{id} and POST /v1/chat/completions (docs/protocols/openai.md).

A completion is an ordinary chat turn: it goes through the same use cases as /api/v1/chat and
/api/v1/chat/stream, is stored under a session, and only its wire format differs.
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response

from backend.server.api.openai_facade.catalog import available_models, find_model
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.api.openai_facade.citations import result_annotations
from backend.server.api.openai_facade.conversation import chat_messages
from backend.server.api.openai_facade.models import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    CompletionChoice,
    CompletionUsage,
    ModelCard,
    ModelList,
)
from backend.server.api.openai_facade.turn import answer, resolve_turn, stream
from backend.server.api_responses import errors, sse_example, sse_response
from backend.server.deps import ConfigDep, PrincipalDep, RequestIdDep, ServicesDep
from backend.server.sse import EventStreamResponse

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
    turn = await resolve_turn(
        services,
        request,
        principal,
        request_id,
        model_id=body.model,
        messages=partial(chat_messages, body.messages),
        field="messages",
        metadata=body.metadata,
        end_user=body.user,
    )
    completion_id = f"chatcmpl-{request_id}"
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = CompletionChunks(completion_id, turn.created, turn.model, turn.base_url, include_usage)
        return await stream(services, turn, chunks, config.sse_heartbeat_s)
    result = await answer(services, turn)
    response.headers.update(turn.headers)
    message = AssistantMessage(content=result.answer, annotations=result_annotations(result, turn.base_url))
    return ChatCompletion(
        id=completion_id,
        created=turn.created,
        model=turn.model,
        choices=[CompletionChoice(message=message)],
        usage=CompletionUsage.of(result.usage),
    )
