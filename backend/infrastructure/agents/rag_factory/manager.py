"""RAGAgentManager: the bounded, per-process pool of stateless retrieve-only agents.

Keyed `kb_prefix:agent_type:agent_mode`; the session is never part of the key, so the pool size
is bounded by (KBs × agent types), not by traffic. Agents hold no conversation state, which makes
eviction harmless: an evicted agent is rebuilt on next use.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping

from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.domain.agent_types import RETRIEVE_ONLY, is_known_agent_type
from backend.domain.errors import AgentUnavailable, InvalidWorkerName, UnknownAgentType, UnknownKnowledgeBase
from backend.domain.worker_name import ParsedWorkerName
from backend.graphrag_agent.ports import RetrievalAgent
from backend.infrastructure.agents.rag_factory.builders import AgentBuilder, AgentResources


class RAGAgentManager:
    def __init__(
        self,
        catalog: KnowledgeBaseCatalog,
        builders: Mapping[str, AgentBuilder],
        resources: AgentResources,
        max_agents: int = 64,
    ) -> None:
        self._catalog = catalog
        self._builders = dict(builders)
        self._resources = resources
        self._max_agents = max_agents
        self._agents: OrderedDict[str, RetrievalAgent] = OrderedDict()
        self._lock = asyncio.Lock()

    @property
    def available_agent_types(self) -> tuple[str, ...]:
        return tuple(self._builders)

    def __len__(self) -> int:
        return len(self._agents)

    async def resolve(self, worker: ParsedWorkerName) -> ParsedWorkerName:
        """Validate a worker and return it with the KB's canonical prefix; raise a 4xx-type error otherwise."""
        if worker.agent_mode != RETRIEVE_ONLY:
            raise InvalidWorkerName(f"unsupported agent_mode {worker.agent_mode!r}")
        kb = await self._catalog.get(worker.kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {worker.kb_prefix!r}")
        if not is_known_agent_type(worker.agent_type):
            raise UnknownAgentType(f"unknown agent_type {worker.agent_type!r}")
        if worker.agent_type not in self._builders:
            raise AgentUnavailable(
                f"agent type {worker.agent_type!r} is not available in this deployment; "
                f"available: {', '.join(self._builders)}"
            )
        return ParsedWorkerName(kb.kb_prefix, worker.agent_type, RETRIEVE_ONLY)

    async def get_agent(self, worker: ParsedWorkerName) -> RetrievalAgent:
        resolved = await self.resolve(worker)
        key = resolved.pool_key
        agent = self._agents.get(key)
        if agent is not None:
            self._agents.move_to_end(key)
            return agent
        async with self._lock:  # one build per key even when many requests arrive together
            agent = self._agents.get(key)
            if agent is None:
                kb = await self._catalog.get(resolved.kb_prefix)
                assert kb is not None  # resolve() checked it
                agent = self._builders[resolved.agent_type](kb, self._resources)
                self._agents[key] = agent
                while len(self._agents) > self._max_agents:
                    self._agents.popitem(last=False)
            return agent
