"""Durable conversation history (SPEC §6)."""

from __future__ import annotations

from typing import Protocol

from backend.domain.conversation import FeedbackRecord, NewMessage, StartedTurn, StoredMessage


class ConversationStore(Protocol):
    """History keyed by (user_id, session_id).

    Adapters raise `StoreUnavailable` when the backing store cannot be reached and `NotFound`
    when a message or conversation does not belong to the caller.
    """

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        """Race-free: concurrent first calls for one (user, session) return the same id."""
        ...

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None: ...

    async def start_turn(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        """One atomic step, where the store allows one round trip: the (user, session) conversation, created
        if new (race-free); `message` appended to it (idempotent like `append_message`); and the newest
        `history_limit` other messages stored before the call, oldest first (a turn of the same session
        still in flight may be missing from them)."""
        ...

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
