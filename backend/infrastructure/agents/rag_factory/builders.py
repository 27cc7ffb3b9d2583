"""How each agent type is built for a KB: a new agent type is one new entry in `AGENT_BUILDERS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from backend.domain.agent_types import AgentType
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents import (
    DeepResearchAgent,
    FusionAgent,
    GraphAgent,
    GraphSearchSettings,
    HybridAgent,
    NaiveRagAgent,
)
from backend.graphrag_agent.agents.naive_rag_agent import default_search_depth
from backend.graphrag_agent.keywords import LlmKeywordExtractor, OfflineKeywordExtractor
from backend.graphrag_agent.model import CompletionModel
from backend.graphrag_agent.ports import GraphReader, RetrievalAgent, TextEmbedder
from backend.graphrag_agent.shared_reads import SharedReads


@dataclass(frozen=True, slots=True)
class AgentResources:
    """The long-lived resources agents share (opened once by the composition root)."""

    reader: GraphReader
    embedder: TextEmbedder
    top_k: int = 8
    model: CompletionModel | None = None  # keywords and research planning; offline methods without it


AgentBuilder = Callable[[KnowledgeBase, AgentResources], RetrievalAgent]


def _naive_rag(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return NaiveRagAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k)


def _graph(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return GraphAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k)


def _hybrid(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    keywords = LlmKeywordExtractor(res.model) if res.model is not None else OfflineKeywordExtractor()
    return HybridAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, keywords=keywords)


def _deep_research(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return DeepResearchAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, model=res.model)


def _fusion(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    # The members ask much the same of the store and the embedder for one question: they share those reads,
    # and each search is run once as deep as the deepest member's.
    depth = max(default_search_depth(res.top_k), GraphSearchSettings().candidates)
    shared = SharedReads(res.reader, res.embedder, search_depth=depth)
    members_res = replace(res, reader=shared.reader, embedder=shared.embedder)
    members = [build(kb, members_res) for build in (_naive_rag, _graph, _hybrid, _deep_research)]
    return FusionAgent(members, top_k=res.top_k, shared_reads=shared)


AGENT_BUILDERS: Mapping[str, AgentBuilder] = {
    AgentType.NAIVE_RAG.value: _naive_rag,
    AgentType.GRAPH.value: _graph,
    AgentType.HYBRID.value: _hybrid,
    AgentType.DEEP_RESEARCH.value: _deep_research,
    AgentType.FUSION.value: _fusion,
}
