"""What the service needs from a chat model, independent of the wire protocol."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """One message sent to the model; `role` is "system", "user" or "assistant"."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """One upstream stream chunk: answer text, reasoning text, and/or the final token usage."""

    content: str = ""
    reasoning: str = ""
    usage: dict[str, int] | None = None


class ChatModel(Protocol):
    """A chat model. Every failure surfaces as `backend.domain.errors.ModelError`."""

    @property
    def model_name(self) -> str: ...

    async def complete(self, messages: Sequence[ChatTurn]) -> str:
        """The whole answer, non-streaming."""
        ...

    def stream(self, messages: Sequence[ChatTurn]) -> AsyncGenerator[ModelDelta, None]:
        """One `ModelDelta` per upstream delta, yielded as soon as it arrives.

        An async generator (not just an iterator) so consumers that may stop early can close it with
        `contextlib.aclosing`, releasing the HTTP response at once rather than at garbage collection.
        """
        ...

    async def aclose(self) -> None: ...
