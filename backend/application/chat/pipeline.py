"""The event pipeline: every internal event of a run passes one chain of middlewares before any protocol sees it.

A middleware sees the run begin (`on_run_start`), every event (`on_event`: pass it on, replace it, drop it, or
add events after it) and the run end (`on_run_end`: it may add events before the final `done`, and record
data stored with the assistant message). The SSE protocol, AG-UI and the OpenAI facade all consume the
events that leave the chain, so what one protocol shows, the others show too.

Stages fail open: a middleware that raises is logged and skipped for that call, and the event goes on as it
was. `start` and `done` are never dropped or replaced: the protocols rely on them being first and last.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.domain.context import RequestContext
from backend.domain.events import EventKind, StreamEvent

logger = logging.getLogger(__name__)

# What `on_event` returns: the event to send on (possibly another one), None to drop it, or several events.
EventOutcome = StreamEvent | None | tuple[StreamEvent, ...]

_PROTECTED = frozenset({EventKind.START, EventKind.DONE})


@dataclass(slots=True)
class Run:
    """One request's run through the pipeline. Middlewares keep their per-run state in `state`, never on
    themselves (a middleware instance serves every request), and put what belongs with the stored assistant
    message in `record`."""

    context: RequestContext
    message: str
    started: float = field(default_factory=time.perf_counter)
    state: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    completed: bool
    error: str | None = None


class EventMiddleware(Protocol):
    """One stage of the pipeline. `on_event` is synchronous: it runs for every token."""

    @property
    def name(self) -> str: ...

    async def on_run_start(self, run: Run) -> None: ...

    def on_event(self, run: Run, event: StreamEvent) -> EventOutcome: ...

    async def on_run_end(self, run: Run, outcome: RunOutcome) -> Sequence[StreamEvent]: ...


class EventPipeline:
    """The chain, in order. Stateless between runs; one instance serves every request."""

    def __init__(self, middlewares: Sequence[EventMiddleware] = ()) -> None:
        self._middlewares = tuple(middlewares)

    async def start(self, run: Run) -> None:
        for middleware in self._middlewares:
            try:
                await middleware.on_run_start(run)
            except Exception:
                _skipped(middleware, "on_run_start", run)

    def process(self, run: Run, event: StreamEvent) -> tuple[StreamEvent, ...]:
        """The events `event` becomes after every middleware, in order (runs for every token: no copies when a
        stage passes the event on as it is)."""
        events: tuple[StreamEvent, ...] = (event,)
        for middleware in self._middlewares:
            if len(events) == 1:
                events = self._one(middleware, run, events[0])
            else:
                events = tuple(out for current in events for out in self._one(middleware, run, current))
        return events

    async def finish(self, run: Run, outcome: RunOutcome) -> list[StreamEvent]:
        """The events the middlewares add at the end (each passed through the middlewares after it)."""
        added: list[StreamEvent] = []
        for position, middleware in enumerate(self._middlewares):
            try:
                produced = list(await middleware.on_run_end(run, outcome))
            except Exception:
                _skipped(middleware, "on_run_end", run)
                continue
            later = EventPipeline(self._middlewares[position + 1 :])
            for event in produced:
                added.extend(later.process(run, event))
        return added

    @staticmethod
    def _one(middleware: EventMiddleware, run: Run, event: StreamEvent) -> tuple[StreamEvent, ...]:
        try:
            outcome = middleware.on_event(run, event)
        except Exception:
            _skipped(middleware, "on_event", run)
            return (event,)
        if outcome is event:  # passed on as it is: the usual outcome, and the one every token takes
            return (event,)
        produced = () if outcome is None else outcome if isinstance(outcome, tuple) else (outcome,)
        if event.kind in _PROTECTED:
            if not any(item is event for item in produced):
                logger.warning("event middleware %s dropped or replaced %s; kept", middleware.name, event.kind.value)
            return _with(produced, event)
        return produced


def _with(produced: Sequence[StreamEvent], event: StreamEvent) -> tuple[StreamEvent, ...]:
    """`produced` with the protected `event` in its place: first for `start`, last for `done`."""
    others = tuple(item for item in produced if item.kind not in _PROTECTED)
    return (event, *others) if event.kind is EventKind.START else (*others, event)


def _skipped(middleware: EventMiddleware, hook: str, run: Run) -> None:
    logger.exception(
        "event middleware %s failed in %s for request %s; skipped", middleware.name, hook, run.context.request_id
    )
