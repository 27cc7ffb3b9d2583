"""Conversation messages: what a chat model reads, and the history records a conversation stores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a chat model reads it: who says it and what.

    The one shape of a prompt's messages, of a turn's history and of what the model clients send, so that no
    layer converts between look-alikes. A stored message (`StoredMessage`) has the same two fields besides its ids
    and metadata.
    """

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Citation:
    """A source an answer was given, as shown to the client: a cited one is the n-th of the answer's citations
    (its `[n]` markers count from 1), a consulted one is not cited (domain/citations.py)."""

    id: str
    title: str
    doc_id: str
    chunk_id: str
    snippet: str

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "title": self.title,
            "doc_id": self.doc_id,
            "chunk_id": self.chunk_id,
            "snippet": self.snippet,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Citation:
        return cls(**{key: str(raw.get(key, "")) for key in ("id", "title", "doc_id", "chunk_id", "snippet")})


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message about to be stored."""

    role: Role
    content: str
    citations: tuple[Citation, ...] = ()
    consulted: tuple[Citation, ...] = ()  # sources the answer was given and does not cite
    debug: dict[str, Any] | None = None
    completed: bool = True
    request_id: str | None = None
    # The user message an answer replies to: the answer is stored only while that message exists, and goes
    # with it (a clear racing a stream leaves no answer to a cleared question).
    reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str
    conversation_id: str
    role: Role
    content: str
    created_at: datetime
    citations: tuple[Citation, ...] = ()
    consulted: tuple[Citation, ...] = ()
    debug: dict[str, Any] | None = None
    completed: bool = True
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class StartedTurn:
    """A turn's user message as stored, in its conversation, with the messages stored before it."""

    conversation_id: str
    message: StoredMessage
    earlier: tuple[StoredMessage, ...]  # oldest first


def newest_others(messages: Sequence[StoredMessage], message_id: str, limit: int) -> tuple[StoredMessage, ...]:
    """The newest `limit` of `messages` (oldest first) other than `message_id`, still oldest first."""
    others = [message for message in messages if message.id != message_id]
    return tuple(others[max(len(others) - limit, 0) :]) if limit > 0 else ()


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    message_id: str
    is_positive: bool
    query: str = ""
    thread_id: str = ""
    agent_type: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
