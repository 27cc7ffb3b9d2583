"""Answer generation: general chat, RAG (non-streaming) and the streaming executor."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Protocol

from backend.domain.context import RequestContext
from backend.domain.conversation import Citation, Role
from backend.domain.events import StreamEvent
from backend.domain.generation import GenerationMode
from backend.domain.retrieval import AgentRun, RagRunSpec


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """Everything a generator needs for one turn. An empty plan means general chat."""

    context: RequestContext
    message: str
    kb_prefix: str = ""
    plan: tuple[RagRunSpec, ...] = ()
    history: tuple[HistoryTurn, ...] = ()


@dataclass(frozen=True, slots=True)
class GeneratedAnswer:
    text: str
    mode: GenerationMode
    citations: tuple[Citation, ...] = ()
    runs: tuple[AgentRun, ...] = field(default=())


class ChatCompletionPort(Protocol):
    """General chat without retrieval (non-streaming)."""

    async def generate(self, request: GenerationRequest) -> GeneratedAnswer: ...


class RAGExecutorPort(Protocol):
    """Retrieve with the plan's agents, then generate the whole answer (non-streaming)."""

    async def run(self, request: GenerationRequest) -> GeneratedAnswer: ...


class ChatStreamExecutorPort(Protocol):
    """Streams progress, citations (before the first token), tokens and errors for one turn.

    It never emits `start` or `done`: the stream use case owns the beginning and the end.
    """

    @property
    def mode(self) -> GenerationMode: ...

    def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]: ...
