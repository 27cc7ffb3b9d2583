"""StreamHandler: the same turn as ChatHandler, as a stream of events (SPEC §5, §10).

`start` is first and `done` last, exactly once each. Every event passes the event pipeline (pipeline.py)
before any protocol sees it. The assistant message is stored exactly once: at the end, or — when the client
goes away mid-stream — by a shielded task that the disconnect cannot cancel, marked as not completed.
Each request runs under its own budget (model calls, time; domain/budget.py): going over ends the stream
with an `error` (code `budget_exceeded`) and keeps what was produced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.inputs import ChatInput
from backend.application.chat.pipeline import EventPipeline, Run, RunOutcome
from backend.application.chat.turns import AssistantDraft, PreparedTurn, TurnService, generation_request
from backend.application.ports.generation import ChatStreamExecutorPort
from backend.application.ports.router import RouterPort
from backend.domain.budget import budget_scope
from backend.domain.context import RequestContext
from backend.domain.errors import GraphRagError
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    RoutedEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)

logger = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error while answering; what was generated so far has been kept"


class StreamHandler:
    def __init__(
        self,
        turns: TurnService,
        router: RouterPort,
        executor: ChatStreamExecutorPort,
        pipeline: EventPipeline | None = None,
        budgets: BudgetPolicy | None = None,
    ) -> None:
        self._turns = turns
        self._router = router
        self._executor = executor
        self._pipeline = pipeline or EventPipeline()
        self._budgets = budgets or BudgetPolicy()
        self._pending_saves: set[asyncio.Task[str | None]] = set()

    async def prepare(self, context: RequestContext, chat_input: ChatInput) -> PreparedTurn:
        """Validate and store the user message; raises before any byte of the stream is sent."""
        return await self._turns.prepare(context, chat_input)

    async def events(self, turn: PreparedTurn) -> AsyncGenerator[StreamEvent, None]:
        """The turn's events after the pipeline; the answer is built from what leaves it, so the stored message
        is what the client was sent."""
        draft = AssistantDraft(mode=self._executor.mode)
        run = Run(turn.context, turn.message)
        saved = False
        with budget_scope(self._budgets.new()) as budget:
            try:
                await self._pipeline.start(run)
                for event in self._through(run, draft, StartEvent()):
                    yield event
                try:
                    async with aclosing(self._produce(turn, draft)) as produced:
                        async for raw in produced:
                            budget.check_time()
                            for event in self._through(run, draft, raw):
                                yield event
                    draft.completed = True
                except GraphRagError as error:
                    draft.error = error.message
                    for event in self._through(run, draft, ErrorEvent(error.message, error.code)):
                        yield event
                except Exception:
                    logger.exception("stream for request %s failed", turn.context.request_id)
                    draft.error = INTERNAL_ERROR_MESSAGE
                    for event in self._through(run, draft, ErrorEvent(INTERNAL_ERROR_MESSAGE, "internal_error")):
                        yield event
                for event in await self._pipeline.finish(run, RunOutcome(draft.completed, draft.error)):
                    _keep(draft, event)
                    yield event
                draft.debug |= run.record
                saved = True
                message_id = await self._save_shielded(turn, draft)
                if message_id is None:
                    unsaved = ErrorEvent(
                        "the answer could not be saved to the conversation history", "store_unavailable"
                    )
                    for event in self._through(run, draft, unsaved):
                        yield event
                for event in self._through(run, draft, DoneEvent(message_id)):
                    yield event
            finally:
                if not saved:
                    draft.error = draft.error or "client disconnected before the answer was complete"
                    draft.debug |= run.record
                    await self._save_shielded(turn, draft)

    def _through(self, run: Run, draft: AssistantDraft, event: StreamEvent) -> Sequence[StreamEvent]:
        processed = self._pipeline.process(run, event)
        for out in processed:
            _keep(draft, out)
        return processed

    async def _produce(self, turn: PreparedTurn, draft: AssistantDraft) -> AsyncGenerator[StreamEvent, None]:
        yield ProgressEvent(Stage.ROUTING, completed=0, total=1)
        started = time.perf_counter()
        draft.decision = await self._router.route(
            message=turn.message,
            session_id=turn.context.session_id,
            requested_kb=turn.requested.kb_prefix,
            agent_type=turn.requested.agent_type,
        )
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        request = generation_request(turn, draft.decision)
        yield ProgressEvent(Stage.ROUTING, completed=1, total=1)
        yield RoutedEvent(turn.message, draft.decision, duration_ms, request.plan)
        async with aclosing(self._executor.stream(request)) as events:
            async for event in events:
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


def _keep(draft: AssistantDraft, event: StreamEvent) -> None:
    """What of an outgoing event belongs to the stored assistant message."""
    if isinstance(event, TokenEvent):
        draft.tokens.append(event.text)
    elif isinstance(event, CitationsEvent):
        draft.citations = event.citations
    elif isinstance(event, ExecutionLogEvent):
        draft.execution_log.append(
            {"node": event.node, "input": event.input, "output": event.output, "duration_ms": event.duration_ms}
        )
