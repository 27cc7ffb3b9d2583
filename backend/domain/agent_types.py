"""The retrieval agent types and the only agent mode."""

from __future__ import annotations

from enum import StrEnum


class AgentType(StrEnum):
    GRAPH = "graph_agent"
    HYBRID = "hybrid_agent"
    NAIVE_RAG = "naive_rag_agent"
    DEEP_RESEARCH = "deep_research_agent"
    FUSION = "fusion_agent"


KNOWN_AGENT_TYPES: frozenset[str] = frozenset(t.value for t in AgentType)
DEFAULT_AGENT_TYPE = AgentType.HYBRID.value
RETRIEVE_ONLY = "retrieve_only"


def is_known_agent_type(value: str) -> bool:
    return value in KNOWN_AGENT_TYPES
