"""The retrieval agent types and the only agent mode."""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum

from backend.domain.errors import AgentUnavailable, UnknownAgentType


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


def require_available(agent_type: str, available: Collection[str]) -> None:
    """Raise the 4xx-type error for an agent type that is unknown or that this deployment does not run."""
    if not is_known_agent_type(agent_type):
        raise UnknownAgentType(f"unknown agent_type {agent_type!r}")
    if agent_type not in available:
        raise AgentUnavailable(
            f"agent type {agent_type!r} is not available in this deployment; available: {', '.join(sorted(available))}"
        )
