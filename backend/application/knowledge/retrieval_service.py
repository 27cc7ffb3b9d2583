"""Run one retrieval agent and return its ranked evidence, without generating an answer."""

from __future__ import annotations

from dataclasses import replace

from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.application.ports.retrieval import RetrievalOutcome, Retriever
from backend.domain.agent_types import require_available
from backend.domain.errors import InvalidRequest, UnknownKnowledgeBase
from backend.domain.worker import Worker

MAX_TOP_K = 50
MAX_QUERY_CHARS = 4000


class RetrievalService:
    def __init__(self, catalog: KnowledgeBaseCatalog, retriever: Retriever) -> None:
        self._catalog = catalog
        self._retriever = retriever

    async def retrieve(self, kb_prefix: str, query: str, agent_type: str | None, top_k: int) -> RetrievalOutcome:
        if not query.strip():
            raise InvalidRequest("query must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidRequest(f"query is longer than {MAX_QUERY_CHARS} characters")
        if not 1 <= top_k <= MAX_TOP_K:
            raise InvalidRequest(f"top_k must be between 1 and {MAX_TOP_K}")
        kb = await self._catalog.get(kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        chosen = agent_type or kb.default_agent
        require_available(chosen, self._retriever.available_agent_types)
        outcome = await self._retriever.retrieve(Worker(kb, chosen), query.strip(), thread_id="retrieve")
        return replace(outcome, results=outcome.results[:top_k])
