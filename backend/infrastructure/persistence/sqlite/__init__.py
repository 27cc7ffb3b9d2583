"""Embedded SQLite conversation store (aiosqlite)."""

from backend.infrastructure.persistence.sqlite.conversation_store import SqliteConversationStore

__all__ = ["SqliteConversationStore"]
