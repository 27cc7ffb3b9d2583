"""Postgres conversation store (asyncpg)."""

from backend.infrastructure.persistence.postgres.conversation_store import PostgresConversationStore

__all__ = ["PostgresConversationStore"]
