"""Retrieval without generation (the evaluation endpoint)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.domain.retrieval import RetrievalResult


@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    agent_type: str
    worker_name: str
    results: tuple[RetrievalResult, ...]
    reference: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0


class Retriever(Protocol):
    async def retrieve(self, kb_prefix: str, agent_type: str, query: str, thread_id: str) -> RetrievalOutcome:
        """Run one agent of one KB; unknown KB or agent type raise the usual 4xx-type errors."""
        ...
