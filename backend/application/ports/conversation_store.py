"""Durable conversation history (SPEC §6)."""

from __future__ import annotations

from typing import Protocol

from backend.domain.conversation import FeedbackRecord, NewMessage, StoredMessage


class ConversationStore(Protocol):
    """History keyed by (user_id, session_id).

    Adapters raise `StoreUnavailable` when the backing store cannot be reached and `NotFound`
    when a message or conversation does not belong to the caller.
    """

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        """Race-free: concurrent first calls for one (user, session) return the same id."""
        ...

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None: ...

    async def append_message(self, conversation_id: str, message: NewMessage) -> StoredMessage:
        """Idempotent per (conversation, request_id, role) when `request_id` is set."""
        ...

    async def list_messages(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> list[StoredMessage]:
        """Oldest first; with `limit`, the newest `limit` messages (older than message `before`)."""
        ...

    async def clear_messages(self, conversation_id: str) -> int: ...

    async def add_feedback(self, user_id: str, feedback: FeedbackRecord) -> str:
        """Store feedback on a message of one of `user_id`'s conversations; `NotFound` otherwise."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless the store answers."""
        ...
