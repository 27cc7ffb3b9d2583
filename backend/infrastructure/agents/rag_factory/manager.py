"""RAGAgentManager: the bounded, per-process pool of stateless retrieve-only agents.

Keyed `kb_prefix:agent_type:agent_mode`; the session is never part of the key, so the pool size
is bounded by (KBs × agent types), not by traffic. Agents hold no conversation state, which makes
eviction harmless: an evicted agent is rebuilt on next use.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping

from backend.domain.worker import Worker
from backend.graphrag_agent.ports import RetrievalAgent
from backend.infrastructure.agents.rag_factory.builders import AgentBuilder, AgentResources


class RAGAgentManager:
    def __init__(
        self,
        builders: Mapping[str, AgentBuilder],
        resources: AgentResources,
        max_agents: int = 64,
    ) -> None:
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

    async def get_agent(self, worker: Worker) -> RetrievalAgent:
        """The pooled agent of a resolved worker, built on first use (its KB and agent type are validated)."""
        key = worker.name
        agent = self._agents.get(key)
        if agent is not None:
            self._agents.move_to_end(key)
            return agent
        async with self._lock:  # one build per key even when many requests arrive together
            agent = self._agents.get(key)
            if agent is None:
                agent = self._builders[worker.agent_type](worker.kb, self._resources)
                self._agents[key] = agent
                while len(self._agents) > self._max_agents:
                    self._agents.popitem(last=False)
            return agent
