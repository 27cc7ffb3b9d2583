"""The debug middleware: `execution_log` events at the request's debug level, stored with the answer.

- basic: the run's timings at its end (routing, retrieval, time to first token, generation, total);
- standard: also the route decision and each retrieval as they happen, and each model call at the end, with
  texts cut to `TRUNCATE_CHARS`;
- full: the same, nothing cut, and each retrieval's evidence texts.

The events go to every protocol; the stream handler stores the ones that leave the pipeline with the
assistant message. Model calls come from the request's budget (domain/budget.py), where the model adapter
records them with secrets already masked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.application.chat.pipeline import EventOutcome, Run, RunOutcome
from backend.domain.budget import ModelCall, current_budget
from backend.domain.debug import DebugLevel
from backend.domain.events import (
    EventKind,
    ExecutionLogEvent,
    ProgressEvent,
    RetrievedEvent,
    RoutedEvent,
    Stage,
    StreamEvent,
)
from backend.domain.retrieval import RetrievalResult

TRUNCATE_CHARS = 500
_STATE = "debug"


@dataclass(slots=True)
class _Clock:
    """When each stage started and ended (perf_counter seconds), and the first token."""

    started: float = field(default_factory=time.perf_counter)
    stage_start: dict[Stage, float] = field(default_factory=dict)
    stage_end: dict[Stage, float] = field(default_factory=dict)
    first_token: float | None = None

    def ms(self, start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None else round((end - start) * 1000, 3)


class DebugMiddleware:
    @property
    def name(self) -> str:
        return "debug"

    async def on_run_start(self, run: Run) -> None:
        if run.context.debug_level is not DebugLevel.OFF:
            run.state[_STATE] = _Clock()
            run.record["debug_level"] = run.context.debug_level.value

    def on_event(self, run: Run, event: StreamEvent) -> EventOutcome:
        clock: _Clock | None = run.state.get(_STATE)
        if clock is None:
            return event
        kind = event.kind
        if kind is EventKind.TOKEN:
            if clock.first_token is None:
                clock.first_token = time.perf_counter()
            return event
        if isinstance(event, ProgressEvent):
            _note_stage(clock, event)
            return event
        level = run.context.debug_level
        if not level.at_least(DebugLevel.STANDARD):
            return event
        if isinstance(event, RoutedEvent):
            decision = event.decision.to_dict()
            return event, ExecutionLogEvent(
                "route", {"message": _cut(event.message, level)}, decision, event.duration_ms
            )
        if isinstance(event, RetrievedEvent):
            return event, _retrieval_log(event, level)
        return event

    async def on_run_end(self, run: Run, outcome: RunOutcome) -> Sequence[StreamEvent]:
        clock: _Clock | None = run.state.get(_STATE)
        if clock is None:
            return ()
        level = run.context.debug_level
        budget = current_budget()
        logs: list[StreamEvent] = []
        if level.at_least(DebugLevel.STANDARD) and budget is not None:
            logs.extend(_model_call_log(call, level) for call in budget.model_calls())
        logs.append(_timings(clock, outcome, budget.charged if budget else None))
        return logs


def _note_stage(clock: _Clock, event: ProgressEvent) -> None:
    now = time.perf_counter()
    if event.completed == 0:
        clock.stage_start.setdefault(event.stage, now)
    if event.total and event.completed >= event.total:
        clock.stage_end[event.stage] = now


def _timings(clock: _Clock, outcome: RunOutcome, model_calls: int | None) -> ExecutionLogEvent:
    now = time.perf_counter()
    output: dict[str, Any] = {
        stage.value + "_ms": clock.ms(clock.stage_start.get(stage), clock.stage_end.get(stage)) for stage in Stage
    }
    output["first_token_ms"] = clock.ms(clock.started, clock.first_token)
    output["total_ms"] = clock.ms(clock.started, now)
    output["completed"] = outcome.completed
    output["model_calls"] = model_calls
    return ExecutionLogEvent("timings", {}, output, output["total_ms"] or 0.0)


def _retrieval_log(event: RetrievedEvent, level: DebugLevel) -> ExecutionLogEvent:
    run = event.run
    output: dict[str, Any] = {"results": [_result(r, level) for r in run.results], "error": run.error}
    if level.at_least(DebugLevel.FULL):
        output["reference"] = run.reference
    return ExecutionLogEvent(
        f"retrieval:{run.agent_type}",
        {"query": _cut(event.query, level), "kb": event.kb_prefix, "worker_name": run.worker_name},
        output,
        run.duration_ms,
    )


def _result(result: RetrievalResult, level: DebugLevel) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": result.result_id, "title": result.source.title, "score": round(result.score, 4)}
    if level.at_least(DebugLevel.FULL):
        entry["text"] = result.evidence
    return entry


def _model_call_log(call: ModelCall, level: DebugLevel) -> ExecutionLogEvent:
    messages = [{"role": role, "content": _cut(content, level)} for role, content in call.messages]
    output = {"answer": None if call.answer is None else _cut(call.answer, level), "streamed": call.streamed}
    return ExecutionLogEvent("model_call", {"model": call.model, "messages": messages}, output, call.duration_ms or 0.0)


def _cut(text: str, level: DebugLevel) -> str:
    if level.at_least(DebugLevel.FULL) or len(text) <= TRUNCATE_CHARS:
        return text
    return text[:TRUNCATE_CHARS] + f"… [{len(text) - TRUNCATE_CHARS} more characters]"
