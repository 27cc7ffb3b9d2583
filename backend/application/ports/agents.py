"""The pool of retrieve-only agents, as the RAG use case sees it."""

from __future__ import annotations

from typing import Protocol

from backend.domain.retrieval import AgentTrace
from backend.domain.worker import Worker


class PooledAgent(Protocol):
    """A stateless, retrieve-only agent (the core's `RetrievalAgent` conforms)."""

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace: ...


class AgentPool(Protocol):
    """Agents keyed by worker name (`kb_prefix:agent_type:agent_mode`), never by session."""

    @property
    def available_agent_types(self) -> tuple[str, ...]:
        """The agent types this deployment runs."""
        ...

    async def get_agent(self, worker: Worker) -> PooledAgent: ...
