"""ChatStreamExecutor: retrieval progress, the sources, then the answer as it is generated.

Strict true streaming: every model delta becomes exactly one token event, yielded at once. Once the answer is
generated, a `UsageEvent` says the tokens it took: as the model reported them, else estimated.
Errors are raised, not swallowed: the stream use case turns them into an `error` event and
stores what was produced so far as a partial answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from backend.application.answering.generator import AnswerGenerator
from backend.application.ports.generation import GenerationRequest
from backend.application.rag.aggregation import to_citations
from backend.application.rag.kb_handlers import KnowledgeBaseHandlerFactory
from backend.application.rag.rag_manager import RagManager
from backend.domain.events import (
    ProgressEvent,
    ReasoningEvent,
    RetrievedEvent,
    SourcesEvent,
    Stage,
    StreamEvent,
    TokenEvent,
    UsageEvent,
)
from backend.domain.generation import GenerationMode
from backend.domain.retrieval import AgentRun, RetrievalResult
from backend.domain.tokens import TokenUsage


class ChatStreamExecutor:
    """Implements `ChatStreamExecutorPort`. An empty plan is general chat: no retrieval, no sources."""

    def __init__(
        self, rag: RagManager, generator: AnswerGenerator, handlers: KnowledgeBaseHandlerFactory | None = None
    ) -> None:
        self._rag = rag
        self._generator = generator
        self._handlers = handlers or KnowledgeBaseHandlerFactory()

    @property
    def mode(self) -> GenerationMode:
        return self._generator.mode

    def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]:
        # Returned, not wrapped: an extra generator layer would cost every token a hop.
        handler = self._handlers.get(request.kb_prefix) if request.plan else None
        return handler.stream(request) if handler else self._generic(request)

    async def _generic(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]:
        evidence: list[RetrievalResult] = []
        if request.plan:
            runs: list[AgentRun] = []
            async with aclosing(self._retrieve(request, runs)) as progress:
                async for event in progress:
                    yield event
            evidence = self._rag.aggregate(runs)
            yield SourcesEvent(to_citations(evidence))
        yield ProgressEvent(Stage.GENERATION, completed=0, total=1)
        answer: list[str] = []
        reported: TokenUsage | None = None
        async with aclosing(self._generator.stream(request, evidence)) as deltas:
            async for delta in deltas:
                if delta.reasoning:
                    yield ReasoningEvent(delta.reasoning)
                if delta.content:
                    answer.append(delta.content)
                    yield TokenEvent(delta.content)
                if delta.usage is not None:
                    reported = delta.usage
        yield UsageEvent(reported or self._generator.counted_usage(request, evidence, "".join(answer)))
        yield ProgressEvent(Stage.GENERATION, completed=1, total=1)

    async def _retrieve(self, request: GenerationRequest, runs: list[AgentRun]) -> AsyncGenerator[StreamEvent, None]:
        total = len(request.plan)
        yield ProgressEvent(Stage.RETRIEVAL, completed=0, total=total)
        async with aclosing(self._rag.iter_runs(request)) as completed_runs:
            async for run in completed_runs:
                runs.append(run)
                yield ProgressEvent(
                    Stage.RETRIEVAL,
                    completed=len(runs),
                    total=total,
                    error=run.error,
                    agent_type=run.agent_type,
                    retrieval_count=len(run.results),
                )
                yield RetrievedEvent(request.search_query, request.kb_prefix, run)
