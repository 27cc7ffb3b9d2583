"""GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions and POST /v1/responses
(docs/protocols/openai.md).

A completion, like a response, is an ordinary chat turn: it goes through the same use cases as /api/v1/chat and
/api/v1/chat/stream, is stored under a session, and only its wire format differs.
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response

from backend.server.api.openai_facade.catalog import available_models, find_model
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.api.openai_facade.citations import result_annotations
from backend.server.api.openai_facade.conversation import chat_messages, input_messages
from backend.server.api.openai_facade.errors import UnsupportedParameter
from backend.server.api.openai_facade.models import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    CompletionChoice,
    CompletionUsage,
    ModelCard,
    ModelList,
)
from backend.server.api.openai_facade.response_models import ResponseObject, ResponseRequest
from backend.server.api.openai_facade.responses import ResponseEnvelope, ResponseEvents
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

RESPONSE_STREAM_EXAMPLE = sse_example(
    {
        "type": "response.output_text.delta",
        "item_id": "msg_6f0c9a2e41d7",
        "output_index": 0,
        "content_index": 0,
        "delta": "Wrenfield Orchard presses its cider in October [1].",
        "logprobs": [],
        "sequence_number": 4,
    },
    {
        "type": "response.output_text.annotation.added",
        "item_id": "msg_6f0c9a2e41d7",
        "output_index": 0,
        "content_index": 0,
        "annotation_index": 0,
        "annotation": {
            "type": "url_citation",
            "url": "http://localhost:8000/api/v1/kbs/orchard/documents/d1",
            "title": "How Wrenfield Cider Is Made",
            "start_index": 47,
            "end_index": 50,
            "snippet": "The apples are pressed in October.",
            "doc_id": "d1",
            "chunk_id": "c1",
            "cited": True,
        },
        "sequence_number": 5,
    },
    named=True,
)
STATEFUL = {
    "previous_response_id": "previous responses are not kept; send the whole conversation in `input`",
    "conversation": "conversations are not kept as objects; send the whole conversation in `input`",
}


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


@router.post(
    "/responses",
    response_model=ResponseObject,
    responses={
        200: sse_response(
            "The response; with `stream: true`, the Responses API's events, each as an `event:` line (its type) and "
            "a `data:` line, ending with `response.completed` (or `response.failed` after an error).",
            "ResponseStreamData",
            RESPONSE_STREAM_EXAMPLE,
            named=True,
        ),
        **errors(404, 409, 501, 502, 504),
    },
)
async def responses(
    body: ResponseRequest,
    request: Request,
    response: Response,
    services: ServicesDep,
    config: ConfigDep,
    principal: PrincipalDep,
    request_id: RequestIdDep,
) -> ResponseObject | EventStreamResponse:
    for name, why in STATEFUL.items():
        if getattr(body, name) is not None:
            raise UnsupportedParameter(f"{name} is not supported: {why}", param=name)
    turn = await resolve_turn(
        services,
        request,
        principal,
        request_id,
        model_id=body.model,
        messages=partial(input_messages, body.input),
        field="input",
        metadata=body.metadata,
        end_user=body.user,
    )
    envelope = ResponseEnvelope(request_id, turn.created, turn.model, body.metadata or {})
    if body.stream:
        return await stream(services, turn, ResponseEvents(envelope, turn.base_url), config.sse_heartbeat_s)
    result = await answer(services, turn)
    response.headers.update(turn.headers)
    message = envelope.message("completed", result.answer, result_annotations(result, turn.base_url))
    return envelope.response("completed", [message], result.usage)
