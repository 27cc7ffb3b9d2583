"""How each agent type is built for a KB: a new agent type is one new entry here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from backend.domain.agent_types import AgentType
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents.naive_rag_agent import NaiveRagAgent
from backend.graphrag_agent.ports import ChunkIndex, RetrievalAgent, TextEmbedder


@dataclass(frozen=True, slots=True)
class AgentResources:
    """The long-lived resources agents share (opened once by the composition root)."""

    chunk_index: ChunkIndex
    embedder: TextEmbedder
    top_k: int = 8


AgentBuilder = Callable[[KnowledgeBase, AgentResources], RetrievalAgent]


def _naive_rag(kb: KnowledgeBase, resources: AgentResources) -> RetrievalAgent:
    return NaiveRagAgent(kb.kb_prefix, resources.chunk_index, resources.embedder, top_k=resources.top_k)


AGENT_BUILDERS: Mapping[str, AgentBuilder] = {
    AgentType.NAIVE_RAG.value: _naive_rag,
}
