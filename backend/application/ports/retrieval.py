"""Retrieval without generation (the evaluation endpoint)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.domain.retrieval import RetrievalResult
from backend.domain.worker import Worker


@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    agent_type: str
    worker_name: str
    results: tuple[RetrievalResult, ...]
    reference: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0


class Retriever(Protocol):
    @property
    def available_agent_types(self) -> tuple[str, ...]: ...

    async def retrieve(self, worker: Worker, query: str, thread_id: str) -> RetrievalOutcome:
        """Run one agent of one KB."""
        ...
