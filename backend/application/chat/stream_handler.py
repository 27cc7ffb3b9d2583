"""StreamHandler: a chat turn as a stream of events (SPEC §5, §10), the one way a turn is produced (ChatHandler
collects this stream for the callers that want the whole answer at once).

`start` is first and `done` last, exactly once each. Every event passes the event pipeline (pipeline.py)
before any protocol sees it. The assistant message is stored exactly once: at the end, or — when the client
goes away mid-stream — marked as not completed, through the AnswerSaver (a write the disconnect cannot cancel).
Each request runs under its own budget (model calls, time; domain/budget.py): going over ends the stream
with an `error` (code `budget_exceeded`) and keeps what was produced.

At shutdown the serving process calls `stop_streams()` once its grace period is over: every stream still being
produced ends cleanly — `error` (code `shutting_down`), then `done` — and keeps its partial answer, rather than
being cut off mid-frame when the server closes its connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from backend.application.chat.answer_saver import AnswerSaver
from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.inputs import ChatInput
from backend.application.chat.pipeline import EventPipeline, Run, RunOutcome
from backend.application.chat.turns import AssistantDraft, PreparedTurn, TurnService, generation_request, plan_for
from backend.application.ports.generation import ChatStreamExecutorPort
from backend.application.ports.router import RouterPort
from backend.domain.budget import budget_scope
from backend.domain.citations import CitationMarkers
from backend.domain.context import RequestContext
from backend.domain.errors import GraphRagError, ShuttingDown
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    RoutedEvent,
    SourcesEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)

logger = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error while answering; what was generated so far has been kept"
SHUTDOWN_MESSAGE = ShuttingDown("the shutdown grace period is over").public_message
SHUTDOWN_CODE = ShuttingDown.code


@dataclass(eq=False, slots=True)
class _LiveStream:
    """One stream being produced, as `stop_streams` sees it."""

    task: asyncio.Task[object] | None  # the task that iterates the stream (the protocol's response)
    stopping: bool = False
    producing: bool = False  # waiting for the next event from routing, retrieval or the model
    interrupted: bool = False  # `stop_streams` cancelled that wait


class StreamHandler:
    def __init__(
        self,
        turns: TurnService,
        router: RouterPort,
        executor: ChatStreamExecutorPort,
        pipeline: EventPipeline | None = None,
        budgets: BudgetPolicy | None = None,
        saver: AnswerSaver | None = None,
    ) -> None:
        self._turns = turns
        self._router = router
        self._executor = executor
        self._pipeline = pipeline or EventPipeline()
        self._budgets = budgets or BudgetPolicy()
        self._saver = saver or AnswerSaver(turns)
        self._live: set[_LiveStream] = set()
        self._stopping = False

    @property
    def active_streams(self) -> int:
        """Streams being produced now."""
        return len(self._live)

    @property
    def pending_saves(self) -> int:
        """Answers still being stored (after disconnects, or at the end of streams)."""
        return self._saver.pending

    def stop_streams(self) -> int:
        """End every stream being produced, and any opened later, with `error` (`shutting_down`) and `done`.

        A stream waiting for its next event is interrupted at once (its task is cancelled and the cancellation
        taken back); one whose event is being sent stops before it asks for the next. Returns how many streams
        were running.
        """
        self._stopping = True
        for live in self._live:
            live.stopping = True
            if live.producing and live.task is not None and not live.interrupted:
                live.interrupted = True
                live.task.cancel()
        return len(self._live)

    async def prepare(self, context: RequestContext, chat_input: ChatInput) -> PreparedTurn:
        """Validate and store the user message; raises before any byte of the stream is sent."""
        return await self._turns.prepare(context, chat_input)

    async def events(
        self, turn: PreparedTurn, draft: AssistantDraft | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """The turn's events after the pipeline; the answer is built from what leaves it, so the stored message
        is what the client was sent. A caller that wants the answer whole passes `draft`, the answer being built:
        once the stream has ended, it holds what was stored."""
        if draft is None:
            draft = AssistantDraft()
        draft.mode = self._executor.mode
        run = Run(turn.context, turn.message)
        live = _LiveStream(asyncio.current_task(), stopping=self._stopping)
        self._live.add(live)
        saved = False
        with budget_scope(self._budgets.new()) as budget:
            try:
                await self._pipeline.start(run)
                for event in self._through(run, draft, StartEvent()):
                    yield event
                try:
                    # Routing, then the executor's own stream read here directly: a generator chaining the two
                    # would cost every token one more hop.
                    for stage in (self._route, self._answer):
                        async with aclosing(stage(turn, draft)) as produced:
                            # Not `async for`: `stop_streams` must know when the stream waits for its next event.
                            while not live.stopping:
                                live.producing = True
                                try:
                                    raw = await anext(produced)
                                except StopAsyncIteration:
                                    break
                                finally:
                                    live.producing = False
                                budget.check_time()
                                for event in self._through(run, draft, raw):
                                    yield event
                        if live.stopping:
                            break
                    else:
                        draft.completed = True
                except GraphRagError as error:
                    # The client (and the stored message it may read back) gets the error's public text; its
                    # message, which may name hosts and drivers, goes to the log with the request id.
                    logger.warning(
                        "stream for request %s failed: %s: %s", turn.context.request_id, error.code, error.message
                    )
                    draft.error = error.public_message
                    for event in self._through(run, draft, ErrorEvent(error.public_message, error.code)):
                        yield event
                except asyncio.CancelledError:
                    if not _take_back_stop(live):
                        raise
                except Exception:
                    logger.exception("stream for request %s failed", turn.context.request_id)
                    draft.error = INTERNAL_ERROR_MESSAGE
                    for event in self._through(run, draft, ErrorEvent(INTERNAL_ERROR_MESSAGE, "internal_error")):
                        yield event
                _take_back_stop(live)  # production turned the interruption into an error: none may stay pending
                if live.stopping and not draft.completed and draft.error is None:
                    draft.error = SHUTDOWN_MESSAGE
                    for event in self._through(run, draft, ErrorEvent(SHUTDOWN_MESSAGE, SHUTDOWN_CODE)):
                        yield event
                for event in await self._pipeline.finish(run, RunOutcome(draft.completed, draft.error)):
                    _keep(draft, event)
                    yield event
                draft.debug |= run.record
                saved = True
                stored = await self._saver.save(turn, draft)
                if isinstance(stored, GraphRagError):  # not kept: the client is told why, and done has no id
                    unsaved = ErrorEvent(stored.public_message, stored.code)
                    for event in self._through(run, draft, unsaved):
                        yield event
                done = DoneEvent(None if isinstance(stored, GraphRagError) else stored)
                for event in self._through(run, draft, done):
                    yield event
            finally:
                self._live.discard(live)
                if not saved:
                    draft.error = draft.error or "client disconnected before the answer was complete"
                    draft.debug |= run.record
                    await self._saver.save(turn, draft)

    def _through(self, run: Run, draft: AssistantDraft, event: StreamEvent) -> Sequence[StreamEvent]:
        """The events `event` becomes: the answer's citation markers renumbered (domain/citations.py), then
        the pipeline."""
        markers = draft.markers
        if markers is None:
            if type(event) is SourcesEvent:
                draft.markers = CitationMarkers(event.sources)
            return self._processed(run, draft, event)
        if type(event) is TokenEvent:
            text = markers.feed(event.text)
            if not text:  # all of it may begin a marker: it goes with the next delta
                return ()
            return self._processed(run, draft, event if text == event.text else TokenEvent(text))
        return self._after_text(run, draft, markers, event)

    def _after_text(
        self, run: Run, draft: AssistantDraft, markers: CitationMarkers, event: StreamEvent
    ) -> list[StreamEvent]:
        """`event` once the answer's text may be over: what the markers held back is sent first, and the
        `citations` right after the text (the generation's end), or before an `error` or `done` that ends it."""
        out: list[StreamEvent] = []
        if held := markers.flush():
            out += self._processed(run, draft, TokenEvent(held))
        ends_text = isinstance(event, ProgressEvent) and event.stage is Stage.GENERATION and event.completed
        if isinstance(event, (ErrorEvent, DoneEvent)) and not draft.cited:
            out += self._citations(run, draft, markers)
        out += self._processed(run, draft, event)
        if ends_text and not draft.cited:
            out += self._citations(run, draft, markers)
        return out

    def _citations(self, run: Run, draft: AssistantDraft, markers: CitationMarkers) -> Sequence[StreamEvent]:
        draft.cited = True
        return self._processed(run, draft, CitationsEvent(markers.cited, markers.consulted))

    def _processed(self, run: Run, draft: AssistantDraft, event: StreamEvent) -> Sequence[StreamEvent]:
        processed = self._pipeline.process(run, event)
        for out in processed:
            _keep(draft, out)
        return processed

    async def _route(self, turn: PreparedTurn, draft: AssistantDraft) -> AsyncGenerator[StreamEvent, None]:
        yield ProgressEvent(Stage.ROUTING, completed=0, total=1)
        started = time.perf_counter()
        draft.decision = await self._router.route(
            message=turn.message,
            session_id=turn.context.session_id,
            requested=turn.requested,
            history=turn.history,
        )
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        yield ProgressEvent(Stage.ROUTING, completed=1, total=1)
        yield RoutedEvent(turn.message, draft.decision, duration_ms, plan_for(draft.decision))

    def _answer(self, turn: PreparedTurn, draft: AssistantDraft) -> AsyncGenerator[StreamEvent, None]:
        """Retrieval and generation for the route `_route` chose (the executor's generator, as it is)."""
        assert draft.decision is not None, "routing runs first"
        return self._executor.stream(generation_request(turn, draft.decision))


def _take_back_stop(live: _LiveStream) -> bool:
    """Take back the cancellation with which `stop_streams` interrupted this stream. True when that was the only
    one: any other (the client left, the server gave up on the request) must still end the stream."""
    if not live.interrupted or live.task is None:
        return False
    live.interrupted = False
    return live.task.uncancel() == 0


def _keep(draft: AssistantDraft, event: StreamEvent) -> None:
    """What of an outgoing event belongs to the stored assistant message."""
    if isinstance(event, TokenEvent):
        draft.tokens.append(event.text)
    elif isinstance(event, ExecutionLogEvent):
        draft.execution_log.append(event.to_dict())
