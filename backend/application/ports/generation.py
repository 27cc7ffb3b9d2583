"""Answer generation: what a turn asks of it, and the executor that streams the answer (general chat or RAG)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from backend.domain.context import RequestContext
from backend.domain.conversation import Message
from backend.domain.events import StreamEvent
from backend.domain.generation import GenerationMode
from backend.domain.retrieval import RagRunSpec


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """Everything a generator needs for one turn. An empty plan means general chat."""

    context: RequestContext
    message: str  # as the user wrote it: what a model answers, with the history
    kb_prefix: str = ""
    plan: tuple[RagRunSpec, ...] = ()
    history: tuple[Message, ...] = ()
    query: str = ""  # what retrieval searches for and an extractive answer answers ("": the message)

    @property
    def search_query(self) -> str:
        return self.query or self.message


class ChatStreamExecutorPort(Protocol):
    """Streams progress, citations (before the first token), tokens and errors for one turn.

    It never emits `start` or `done`: the stream use case owns the beginning and the end.
    """

    @property
    def mode(self) -> GenerationMode: ...

    def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]: ...
