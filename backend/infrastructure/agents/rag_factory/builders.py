"""How each agent type is built for a KB: a new agent type is one new entry in `AGENT_BUILDERS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from backend.domain.agent_choice import choose_agent
from backend.domain.agent_types import AgentType
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents import (
    DeepResearchAgent,
    FusionAgent,
    GraphAgent,
    GraphSearchSettings,
    HybridAgent,
    NaiveRagAgent,
    NaiveRagSettings,
)
from backend.graphrag_agent.agents.fusion_agent import LeadOf
from backend.graphrag_agent.model import CompletionModel
from backend.graphrag_agent.ports import GraphReader, RetrievalAgent, TextEmbedder
from backend.graphrag_agent.shared_reads import ReadScope, SharedReads
from backend.graphrag_agent.text import TermSets, index_term_set


@dataclass(frozen=True, slots=True)
class AgentResources:
    """What agents are built with: the long-lived resources the composition root opened, or for the members of
    one fused question, its `ReadScope`'s reader, embedder and term sets in their place."""

    reader: GraphReader
    embedder: TextEmbedder
    top_k: int = 8
    model: CompletionModel | None = None  # keywords and research planning; offline methods without it
    term_sets: TermSets = index_term_set  # how agents tokenise the texts they score


AgentBuilder = Callable[[KnowledgeBase, AgentResources], RetrievalAgent]


def _naive_rag(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return NaiveRagAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, term_sets=res.term_sets)


def _graph(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return GraphAgent(kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, term_sets=res.term_sets)


def _hybrid(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return HybridAgent(
        kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, model=res.model, term_sets=res.term_sets
    )


def _deep_research(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    return DeepResearchAgent(
        kb.kb_prefix, res.reader, res.embedder, top_k=res.top_k, model=res.model, term_sets=res.term_sets
    )


_FUSED = (_naive_rag, _graph, _hybrid, _deep_research)
FUSION_MEMBERS = (
    AgentType.NAIVE_RAG.value,
    AgentType.GRAPH.value,
    AgentType.HYBRID.value,
    AgentType.DEEP_RESEARCH.value,
)


def fusion_lead(kb: KnowledgeBase) -> LeadOf:
    """The member that leads a fused question: the one the router would choose for it (`domain/agent_choice.py`),
    when it is a member."""
    return lambda question: choose_agent(question, kb, FUSION_MEMBERS).agent_type


def _fusion(kb: KnowledgeBase, res: AgentResources) -> RetrievalAgent:
    # The members ask much the same of the store and the embedder for one question: each question's members are
    # built over its own read scope, so they share those reads (each search run once as deep as the deepest
    # member's) and tokenise each text they score once.
    depth = max(NaiveRagSettings().search_depth(res.top_k), GraphSearchSettings().candidates)

    def members(scope: ReadScope) -> list[RetrievalAgent]:
        scoped = replace(res, reader=scope.reader, embedder=scope.embedder, term_sets=scope.term_sets)
        return [build(kb, scoped) for build in _FUSED]

    shared = SharedReads(res.reader, res.embedder, search_depth=depth)
    return FusionAgent.sharing_reads(shared, members, top_k=res.top_k, lead=fusion_lead(kb))


AGENT_BUILDERS: Mapping[str, AgentBuilder] = {
    AgentType.NAIVE_RAG.value: _naive_rag,
    AgentType.GRAPH.value: _graph,
    AgentType.HYBRID.value: _hybrid,
    AgentType.DEEP_RESEARCH.value: _deep_research,
    AgentType.FUSION.value: _fusion,
}
