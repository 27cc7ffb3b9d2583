"""CPU cost per AG-UI event over the internal event stream (issue 5: goal < 50 µs per event).

One run's internal events (route, one retrieval with 8 results, citations, N answer tokens, done) go through
the AG-UI translator (backend/server/agui/translator.py) to SSE frames, in process, many times:

  internal   iterating the events from an async generator, as the endpoint does (the floor)
  sse        the same plus the /api/v1/chat/stream normaliser's frame per event (for comparison)
  agui       the same plus AguiTranslator.frames per event

The overhead per AG-UI event is (agui - internal) / AG-UI events written, reported for the whole run and
for the run without tokens (the structured events: steps, tool calls, citations), whose frames are built
from the ag_ui.core pydantic types rather than the token fast path.

Run:  python -m benchmarks.agui_overhead [--tokens 2000] [--rounds 15]
Writes benchmarks/results/agui_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from backend.domain.conversation import Citation
from backend.domain.events import (
    INTERNAL_KINDS,
    CitationsEvent,
    DoneEvent,
    ProgressEvent,
    RetrievedEvent,
    RoutedEvent,
    SourcesEvent,
    Stage,
    StartEvent,
    StreamEvent,
    TokenEvent,
)
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.retrieval import AgentRun, EvidenceSource, Granularity, RagRunSpec, RetrievalResult
from backend.domain.routing import RouteDecision
from backend.domain.worker import Worker
from backend.server.agui.translator import AguiTranslator
from backend.server.models.stream_events import StreamEventNormalizer
from benchmarks.goals import GOAL_AGUI_US

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "agui_overhead.json"
QUESTION = "When was the orchard founded, and by whom?"
WORKER = Worker(KnowledgeBase("orchard"), "hybrid_agent")


def run_events(tokens: int) -> list[StreamEvent]:
    """A realistic RAG run: what StreamHandler yields for one question answered with `tokens` deltas."""
    results = tuple(
        RetrievalResult(f"r{i}", Granularity.CHUNK, "evidence " * 40, EvidenceSource(f"d{i}", f"Doc {i}", f"c{i}"), 0.5)
        for i in range(8)
    )
    decision = RouteDecision("orchard", "orchard", "orchard", 0.95, "heuristic", "keyword", WORKER)
    citations = tuple(Citation(str(i), f"Doc {i}", f"d{i}", f"c{i}", "snippet " * 20) for i in range(5))
    return [
        StartEvent(),
        ProgressEvent(Stage.ROUTING, 0, 1),
        ProgressEvent(Stage.ROUTING, 1, 1),
        RoutedEvent(QUESTION, decision, 1.2, (RagRunSpec(WORKER),)),
        ProgressEvent(Stage.RETRIEVAL, 0, 1),
        ProgressEvent(Stage.RETRIEVAL, 1, 1, agent_type="hybrid_agent", retrieval_count=8),
        RetrievedEvent(QUESTION, "orchard", AgentRun("hybrid_agent", WORKER.name, results, duration_ms=40.0)),
        SourcesEvent(citations),
        ProgressEvent(Stage.GENERATION, 0, 1),
        *(TokenEvent(f" word{i % 50}") for i in range(tokens)),
        ProgressEvent(Stage.GENERATION, 1, 1),
        CitationsEvent(citations[:2], citations[2:]),
        DoneEvent("message-1"),
    ]


async def _stream(events: Sequence[StreamEvent]) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


Protocol = Callable[[], Callable[[StreamEvent], Sequence[bytes]] | None]


def _internal() -> None:
    return None


def _sse() -> Callable[[StreamEvent], Sequence[bytes]]:
    normalizer = StreamEventNormalizer("request-1")

    def frames(event: StreamEvent) -> Sequence[bytes]:
        return () if event.kind in INTERNAL_KINDS else (normalizer.frame(event),)

    return frames


def _agui() -> Callable[[StreamEvent], Sequence[bytes]]:
    return AguiTranslator("thread-1", "run-1").frames


async def _one_run(events: Sequence[StreamEvent], protocol: Protocol) -> tuple[float, int]:
    """CPU seconds for one run through `protocol`, and the frames it wrote."""
    started = time.process_time()
    frames = protocol()
    written = 0
    async for event in _stream(events):
        if frames is not None:
            written += len(frames(event))
    return time.process_time() - started, written


async def measure(events: Sequence[StreamEvent], protocol: Protocol, rounds: int) -> tuple[float, int]:
    """Median CPU seconds per run over `rounds` (after one warm-up run), and the frames per run."""
    _, written = await _one_run(events, protocol)
    times = [(await _one_run(events, protocol))[0] for _ in range(rounds)]
    return statistics.median(times), written


async def overhead(events: Sequence[StreamEvent], rounds: int) -> dict[str, Any]:
    internal, _ = await measure(events, _internal, rounds)
    sse, sse_frames = await measure(events, _sse, rounds)
    agui, agui_frames = await measure(events, _agui, rounds)
    return {
        "internal_events": len(events),
        "agui_events": agui_frames,
        "sse_events": sse_frames,
        "internal_us_per_event": round(internal / len(events) * 1e6, 3),
        "agui_overhead_us_per_event": round((agui - internal) / agui_frames * 1e6, 3),
        "sse_overhead_us_per_event": round((sse - internal) / sse_frames * 1e6, 3),
    }


async def run(tokens: int, rounds: int) -> dict[str, Any]:
    whole = await overhead(run_events(tokens), rounds)
    structured = await overhead(run_events(0), rounds * 50)  # small: more rounds for a stable median
    worst = max(whole["agui_overhead_us_per_event"], structured["agui_overhead_us_per_event"])
    return {
        "benchmark": "agui_overhead",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "tokens": tokens,
        "rounds": rounds,
        "results": {"whole_run": whole, "structured_events_only": structured},
        "goals": {
            "agui_overhead_us_per_event": {"goal_max": GOAL_AGUI_US, "measured": worst, "met": worst < GOAL_AGUI_US}
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    summary = asyncio.run(run(args.tokens, args.rounds))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    for name, row in summary["results"].items():
        print(
            f"{name:24} {row['agui_events']:5d} AG-UI events: {row['agui_overhead_us_per_event']:7.2f} µs/event"
            f" (SSE {row['sse_overhead_us_per_event']:.2f} µs/event, internal {row['internal_us_per_event']:.2f})"
        )
    goal = summary["goals"]["agui_overhead_us_per_event"]
    verdict = "met" if goal["met"] else "missed"
    print(f"goal < {GOAL_AGUI_US:.0f} µs per AG-UI event: {verdict} ({goal['measured']:.2f} µs)")


if __name__ == "__main__":
    main()
