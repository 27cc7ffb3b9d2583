"""The retrieve-only agents (SPEC §9): each turns a question into evidence from one KB."""

from backend.graphrag_agent.agents.naive_rag_agent import NaiveRagAgent

__all__ = ["NaiveRagAgent"]
