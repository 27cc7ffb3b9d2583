"""What the service needs from a chat model, independent of the wire protocol, and from its offline stand-in."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Protocol

from backend.domain.conversation import Message
from backend.domain.retrieval import RetrievalResult
from backend.domain.tokens import TokenUsage


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """One upstream stream chunk: answer text, reasoning text, and/or the tokens the call took (as reported)."""

    content: str = ""
    reasoning: str = ""
    usage: TokenUsage | None = None


class ChatModel(Protocol):
    """A chat model. Every failure surfaces as `backend.domain.errors.ModelError`."""

    @property
    def model_name(self) -> str: ...

    async def complete(self, messages: Sequence[Message]) -> str:
        """The whole answer, non-streaming (routing, extraction, summaries: a chat turn's answer is streamed)."""
        ...

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[ModelDelta, None]:
        """One `ModelDelta` per upstream delta, yielded as soon as it arrives.

        An async generator (not just an iterator) so consumers that may stop early can close it with
        `contextlib.aclosing`, releasing the HTTP response at once rather than at garbage collection.
        """
        ...

    async def aclose(self) -> None: ...


class OfflineAnswerer(Protocol):
    """What answers when no chat model is configured (the extractive answerer): from the evidence alone."""

    @property
    def general_answer(self) -> str:
        """The answer to a general-chat turn, which needs a model: says so and how to configure one."""
        ...

    def compose(self, question: str, evidence: Sequence[RetrievalResult]) -> str:
        """An answer to `question` from `evidence` (cited by source number), saying that it is extractive."""
        ...

    def stream_pieces(self, text: str) -> list[str]:
        """Split an answer into word-sized deltas (whitespace kept) so it streams like a model's output."""
        ...
