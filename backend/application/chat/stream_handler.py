"""StreamHandler: the same turn as ChatHandler, as a stream of events (SPEC §5).

`start` is first and `done` last, exactly once each. The assistant message is stored exactly
once: at the end, or — when the client goes away mid-stream — by a shielded task that the
disconnect cannot cancel, marked as not completed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import AssistantDraft, PreparedTurn, TurnService, generation_request
from backend.application.ports.generation import ChatStreamExecutorPort
from backend.application.ports.router import RouterPort
from backend.domain.context import RequestContext
from backend.domain.errors import GraphRagError
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)

logger = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error while answering; what was generated so far has been kept"


class StreamHandler:
    def __init__(self, turns: TurnService, router: RouterPort, executor: ChatStreamExecutorPort) -> None:
        self._turns = turns
        self._router = router
        self._executor = executor
        self._pending_saves: set[asyncio.Task[str | None]] = set()

    async def prepare(self, context: RequestContext, chat_input: ChatInput) -> PreparedTurn:
        """Validate and store the user message; raises before any byte of the stream is sent."""
        return await self._turns.prepare(context, chat_input)

    async def events(self, turn: PreparedTurn) -> AsyncGenerator[StreamEvent, None]:
        draft = AssistantDraft(mode=self._executor.mode)
        saved = False
        try:
            yield StartEvent()
            try:
                async with aclosing(self._produce(turn, draft)) as events:
                    async for event in events:
                        yield event
                draft.completed = True
            except GraphRagError as error:
                draft.error = error.message
                yield ErrorEvent(error.message, error.code)
            except Exception:
                logger.exception("stream for request %s failed", turn.context.request_id)
                draft.error = INTERNAL_ERROR_MESSAGE
                yield ErrorEvent(INTERNAL_ERROR_MESSAGE, "internal_error")
            saved = True
            message_id = await self._save_shielded(turn, draft)
            if message_id is None:
                yield ErrorEvent("the answer could not be saved to the conversation history", "store_unavailable")
            yield DoneEvent(message_id)
        finally:
            if not saved:
                draft.error = draft.error or "client disconnected before the answer was complete"
                await self._save_shielded(turn, draft)

    async def _produce(self, turn: PreparedTurn, draft: AssistantDraft) -> AsyncGenerator[StreamEvent, None]:
        yield ProgressEvent(Stage.ROUTING, completed=0, total=1)
        draft.decision = await self._router.route(
            message=turn.message,
            session_id=turn.context.session_id,
            requested_kb=turn.requested.kb_prefix,
            agent_type=turn.requested.agent_type,
        )
        yield ProgressEvent(Stage.ROUTING, completed=1, total=1)
        if turn.context.debug:
            yield _logged(draft, ExecutionLogEvent("route", {"message": turn.message}, draft.decision.to_dict()))
        async with aclosing(self._executor.stream(generation_request(turn, draft.decision))) as events:
            async for event in events:
                if isinstance(event, TokenEvent):
                    draft.tokens.append(event.text)
                elif isinstance(event, CitationsEvent):
                    draft.citations = event.citations
                elif isinstance(event, ExecutionLogEvent):
                    _logged(draft, event)
                yield event

    async def _save_shielded(self, turn: PreparedTurn, draft: AssistantDraft) -> str | None:
        """Store the answer in a task of its own: a disconnect that cancels the stream cannot cancel it."""
        task = asyncio.create_task(self._save_or_report(turn, draft))
        self._pending_saves.add(task)
        task.add_done_callback(self._pending_saves.discard)
        return await asyncio.shield(task)

    async def _save_or_report(self, turn: PreparedTurn, draft: AssistantDraft) -> str | None:
        try:
            return (await self._turns.save_answer(turn, draft)).id
        except GraphRagError as error:
            logger.error("could not store the answer of request %s: %s", turn.context.request_id, error.message)
            return None

    async def drain(self) -> None:
        """Wait for saves still running after disconnects (called at shutdown)."""
        if self._pending_saves:
            await asyncio.gather(*self._pending_saves, return_exceptions=True)


def _logged(draft: AssistantDraft, event: ExecutionLogEvent) -> ExecutionLogEvent:
    draft.execution_log.append(
        {"node": event.node, "input": event.input, "output": event.output, "duration_ms": event.duration_ms}
    )
    return event
