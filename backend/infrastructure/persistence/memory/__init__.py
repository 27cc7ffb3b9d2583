"""In-memory conversation store (tests only)."""

from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore

__all__ = ["InMemoryConversationStore"]
