"""ChatHandler: one message in, one whole answer out (SPEC §5), for `/api/v1/chat` and the OpenAI facade without
`stream`.

It collects the turn's stream (StreamHandler.events): routing, budgets, the event pipeline (debug), error
handling and saving are the stream's, so a turn is the same whichever way it is asked for. A failure the stream
reports as an `error` event is raised once the stream has ended — the partial answer is stored by then, once —
as the error class of the event's code, so it gets the status and body it had when raised.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from backend.application.chat.inputs import ChatInput
from backend.application.chat.stream_handler import StreamHandler
from backend.application.chat.turns import AssistantDraft, debug_record
from backend.domain.context import RequestContext
from backend.domain.conversation import Citation
from backend.domain.errors import GraphRagError, error_from
from backend.domain.events import DoneEvent, ErrorEvent, UsageEvent
from backend.domain.generation import GenerationMode
from backend.domain.routing import RouteDecision
from backend.domain.tokens import TokenUsage


@dataclass(frozen=True, slots=True)
class ChatResult:
    answer: str
    citations: tuple[Citation, ...]  # cited by the answer's `[n]` markers, in this order
    consulted: tuple[Citation, ...]  # given to the answer, not cited
    route: RouteDecision
    generation_mode: GenerationMode
    conversation_id: str
    user_message_id: str
    message_id: str
    debug: dict[str, Any] | None = None  # the stored message's `debug`, when the request asked for debug data
    usage: TokenUsage | None = None  # the tokens the answer took; None when its KB handler reported none


class ChatHandler:
    def __init__(self, stream: StreamHandler) -> None:
        self._stream = stream

    async def handle(self, context: RequestContext, chat_input: ChatInput) -> ChatResult:
        turn = await self._stream.prepare(context, chat_input)
        draft = AssistantDraft()
        failure: GraphRagError | None = None
        message_id: str | None = None
        usage: TokenUsage | None = None
        async with aclosing(self._stream.events(turn, draft)) as events:
            async for event in events:
                if isinstance(event, ErrorEvent) and failure is None:  # the first says what failed
                    failure = error_from(event.code, event.message)
                elif isinstance(event, UsageEvent):
                    usage = event.usage
                elif isinstance(event, DoneEvent):
                    message_id = event.message_id
        if failure is not None:
            raise failure
        if message_id is None or draft.decision is None or draft.mode is None:  # an `error` event says why first
            raise GraphRagError(f"the stream of request {context.request_id} ended without a stored answer")
        return ChatResult(
            answer=draft.content,
            citations=draft.citations,
            consulted=draft.consulted,
            route=draft.decision,
            generation_mode=draft.mode,
            conversation_id=turn.conversation_id,
            user_message_id=turn.user_message.id,
            message_id=message_id,
            debug=debug_record(draft) if context.debug else None,
            usage=usage,
        )
