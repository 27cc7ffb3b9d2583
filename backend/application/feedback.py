"""Thumbs up / down on an assistant message."""

from __future__ import annotations

from backend.application.ports.conversation_store import ConversationStore
from backend.domain.conversation import FeedbackRecord


class FeedbackService:
    def __init__(self, store: ConversationStore) -> None:
        self._store = store

    async def submit(self, user_id: str, feedback: FeedbackRecord) -> str:
        """Store feedback; `NotFound` unless the message is in one of the caller's conversations."""
        return await self._store.add_feedback(user_id, feedback)
