"""In-memory ConversationStore for tests: the same rules as the durable adapters, no I/O."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from backend.domain.conversation import FeedbackRecord, NewMessage, StartedTurn, StoredMessage, newest_others
from backend.domain.errors import ConversationStoreUnavailable, NotFound, QuestionCleared
from backend.infrastructure.persistence.common import page_request, parse_id, plain_json


@dataclass(slots=True)
class _Conversation:
    user_id: str
    session_id: str
    created_at: datetime
    updated_at: datetime
    messages: list[StoredMessage] = field(default_factory=list)


class InMemoryConversationStore:
    """History held in dicts; one lock makes every operation atomic like a transaction."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._ids: dict[tuple[str, str], str] = {}
        self._conversations: dict[str, _Conversation] = {}
        self._feedback: dict[str, tuple[str, FeedbackRecord]] = {}  # feedback id → (user id, record)
        self._closed = False

    @classmethod
    async def open(cls) -> InMemoryConversationStore:
        return cls()

    async def close(self) -> None:
        self._closed = True

    async def ping(self) -> None:
        self._check_open()

    async def get_or_create_conversation_id(self, user_id: str, session_id: str) -> str:
        async with self._lock:
            self._check_open()
            return self._conversation_id(user_id, session_id)

    async def start_turn(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        async with self._lock:
            self._check_open()
            conversation_id = self._conversation_id(user_id, session_id)
            stored = self._append(conversation_id, message)
            earlier = newest_others(self._conversations[conversation_id].messages, stored.id, history_limit)
        return StartedTurn(conversation_id, stored, earlier)

    def _conversation_id(self, user_id: str, session_id: str) -> str:
        key = (user_id, session_id)
        existing = self._ids.get(key)
        now = datetime.now(UTC)
        if existing is not None:
            self._conversations[existing].updated_at = now
            return existing
        conversation_id = str(uuid.uuid4())
        self._ids[key] = conversation_id
        self._conversations[conversation_id] = _Conversation(user_id, session_id, now, now)
        return conversation_id

    async def find_conversation_id(self, user_id: str, session_id: str) -> str | None:
        async with self._lock:
            self._check_open()
            return self._ids.get((user_id, session_id))

    async def append_message(self, conversation_id: str, message: NewMessage) -> StoredMessage:
        key = str(parse_id(conversation_id, "conversation"))
        async with self._lock:
            self._check_open()
            if key not in self._conversations:
                raise NotFound(f"conversation {conversation_id!r} not found")
            return self._append(key, message)

    def _append(self, key: str, message: NewMessage) -> StoredMessage:
        conversation = self._conversations[key]
        conversation.updated_at = datetime.now(UTC)
        if message.request_id is not None:
            for stored in conversation.messages:
                if stored.request_id == message.request_id and stored.role == message.role:
                    return stored
        if message.reply_to is not None and all(stored.id != message.reply_to for stored in conversation.messages):
            raise QuestionCleared  # as the SQL stores' foreign key refuses it
        stored = _to_stored(key, message)
        conversation.messages.append(stored)
        return stored

    async def list_messages(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> list[StoredMessage]:
        page = page_request(conversation_id, limit, before)
        key, cursor = str(page.conversation), None if page.before is None else str(page.before)
        async with self._lock:
            self._check_open()
            conversation = self._conversations.get(key)
            messages = [] if conversation is None else list(conversation.messages)
        if cursor is not None:
            messages = messages[: _index_of(messages, cursor)]
        if limit is not None:
            messages = messages[len(messages) - limit :] if limit else []
        return messages

    async def clear_messages(self, conversation_id: str) -> int:
        key = str(parse_id(conversation_id, "conversation"))
        async with self._lock:
            self._check_open()
            conversation = self._conversations.get(key)
            if conversation is None:
                return 0
            removed = {message.id for message in conversation.messages}
            conversation.messages.clear()
            # Feedback cascades with its message, as in the SQL schemas.
            self._feedback = {fid: entry for fid, entry in self._feedback.items() if entry[1].message_id not in removed}
            return len(removed)

    async def add_feedback(self, user_id: str, feedback: FeedbackRecord) -> str:
        message_id = str(parse_id(feedback.message_id, "message"))
        async with self._lock:
            self._check_open()
            if not self._owns_message(user_id, message_id):
                raise NotFound(f"message {feedback.message_id!r} not found")
            feedback_id = str(uuid.uuid4())
            self._feedback[feedback_id] = (user_id, feedback)
            return feedback_id

    def _owns_message(self, user_id: str, message_id: str) -> bool:
        return any(
            conversation.user_id == user_id and any(m.id == message_id for m in conversation.messages)
            for conversation in self._conversations.values()
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ConversationStoreUnavailable("the in-memory conversation store is closed")


def _to_stored(conversation_id: str, message: NewMessage) -> StoredMessage:
    return StoredMessage(
        id=str(uuid.uuid4()),
        conversation_id=conversation_id,
        role=message.role,
        content=message.content,
        created_at=datetime.now(UTC),
        citations=tuple(message.citations),
        consulted=tuple(message.consulted),
        debug=plain_json(message.debug),
        completed=message.completed,
        request_id=message.request_id,
    )


def _index_of(messages: list[StoredMessage], message_id: str) -> int:
    for index, message in enumerate(messages):
        if message.id == message_id:
            return index
    raise NotFound(f"message {message_id!r} not found in this conversation")
