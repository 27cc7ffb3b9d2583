"""The retrieve-only agents (SPEC §9): each turns a question into evidence from one KB."""

from backend.graphrag_agent.agents.deep_research_agent import DeepResearchAgent
from backend.graphrag_agent.agents.fusion_agent import FusionAgent
from backend.graphrag_agent.agents.graph_agent import GraphAgent
from backend.graphrag_agent.agents.hybrid_agent import HybridAgent
from backend.graphrag_agent.agents.naive_rag_agent import NaiveRagAgent
from backend.graphrag_agent.agents.tuning import GraphSearchSettings, NaiveRagSettings, ResearchSettings

__all__ = [
    "DeepResearchAgent",
    "FusionAgent",
    "GraphAgent",
    "GraphSearchSettings",
    "HybridAgent",
    "NaiveRagAgent",
    "NaiveRagSettings",
    "ResearchSettings",
]
