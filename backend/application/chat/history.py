"""Reading and clearing a user's own conversation history."""

from __future__ import annotations

from backend.application.chat.turns import validate_session_id
from backend.application.ports.conversation_store import ConversationStore
from backend.domain.conversation import StoredMessage
from backend.domain.errors import InvalidRequest, NotFound

MAX_PAGE = 200


class HistoryService:
    def __init__(self, store: ConversationStore) -> None:
        self._store = store

    async def list_messages(
        self, user_id: str, session_id: str, limit: int | None = None, before: str | None = None
    ) -> list[StoredMessage]:
        """The caller's messages in this session; another user's session is simply not found."""
        validate_session_id(session_id)
        if limit is not None and not 1 <= limit <= MAX_PAGE:
            raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}")
        conversation_id = await self._store.find_conversation_id(user_id, session_id)
        if conversation_id is None:
            raise NotFound(f"no conversation {session_id!r}")
        return await self._store.list_messages(conversation_id, limit=limit, before=before)

    async def clear(self, user_id: str, session_id: str) -> int:
        """Delete this conversation's messages (never the knowledge graph); returns how many."""
        validate_session_id(session_id)
        conversation_id = await self._store.find_conversation_id(user_id, session_id)
        if conversation_id is None:
            return 0
        return await self._store.clear_messages(conversation_id)
