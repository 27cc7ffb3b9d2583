"""Which retrieval agent serves a question the request named no agent for (SPEC §4).

The best agent depends on the question's shape more than on the KB. A question that hops from one named thing
to another ("Where was the director of film X born?", "Who is X's mother-in-law?") or compares two ("Which
film came out first, A or B?") needs the passages of several entities and the links between them: the graph
agent follows those links. A look-up of one fact ("When is the garage sale?", "松鸦又叫什么？") is best served by
the plain vector and keyword search of the naive agent, which the graph agents' entity expansion only dilutes.
Anything else (an overview, a theme) goes to the KB's default agent.

The shapes are read from the question's words: English relation nouns (kinship and the roles that link a
work or an organisation to a person), a comparison between named things, and the question words of a
look-up, in English and Chinese.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from backend.domain.agent_types import DEFAULT_AGENT_TYPE, AgentType
from backend.domain.knowledge_base import KnowledgeBase


class QuestionShape(StrEnum):
    BRIDGE = "bridge"  # a relation of a named thing, then a fact about what it leads to
    COMPARISON = "comparison"  # two or more named things weighed against each other
    LOOKUP = "lookup"  # one fact about one thing
    OTHER = "other"  # an overview, a theme, a request


_RELATIONS = (
    r"mother|father|parent|son|daughter|child|children|sibling|brother|sister|husband|wife|spouse|partner|"
    r"grandfather|grandmother|grandparent|grandson|granddaughter|grandchild|uncle|aunt|nephew|niece|cousin|"
    r"stepfather|stepmother|stepson|stepdaughter|in-law|father-in-law|mother-in-law|son-in-law|daughter-in-law|"
    r"brother-in-law|sister-in-law|"
    r"director|producer|composer|performer|singer|author|writer|screenwriter|creator|founder|editor|lyricist|"
    r"architect|designer|owner|publisher|developer|manufacturer|successor|predecessor|mentor|student"
)
_NAME = (
    r"(?:[A-Z0-9][\w'’.-]*)(?:\s+(?:(?:of|the|a|an|and|in|on|de|la|von|van|der)\s+)*[A-Z0-9][\w'’.-]*)*"
    r"(?:\s*\([^()]{1,40}\))?"  # "Illusions (1982 Film)"
)
# "the director of film X", "the performer of song X", "X's mother", "the mother of X"
_BRIDGE = re.compile(
    rf"\b(?:{_RELATIONS})s?\s+of\s+(?:the\s+)?(?:\w+\s+)?{_NAME}|{_NAME}['’]s?\s+(?:\w+\s+)?(?:{_RELATIONS})s?\b",
)
_COMPARATIVE = re.compile(
    r"\b(?:first|earlier|later|last|older|younger|oldest|youngest|longer|shorter|longest|shortest|more|less|"
    r"bigger|smaller|larger|higher|lower|same|both|different|\w+er\s+than)\b|比|更|相同|一样|哪个先",
    re.IGNORECASE,
)
_TWO_NAMES = re.compile(rf"{_NAME}\s*(?:,\s*|\s+)(?:or|and|vs\.?|versus)\s+{_NAME}|还是")
_LOOKUP = re.compile(
    r"^\s*(?:who|whom|whose|what|when|where|which|why|how|is|are|was|were|do|does|did|can|could|has|have|had)\b"
    r"|[谁何哪几多什么怎么吗]",
    re.IGNORECASE,
)


def shape_of(question: str) -> QuestionShape:
    if _TWO_NAMES.search(question) and _COMPARATIVE.search(question):
        return QuestionShape.COMPARISON
    if _BRIDGE.search(question):
        return QuestionShape.BRIDGE
    if _LOOKUP.search(question):
        return QuestionShape.LOOKUP
    return QuestionShape.OTHER


_FOR_SHAPE = {
    QuestionShape.BRIDGE: AgentType.GRAPH.value,
    QuestionShape.COMPARISON: AgentType.GRAPH.value,
    QuestionShape.LOOKUP: AgentType.NAIVE_RAG.value,
}
_WHY = {
    QuestionShape.BRIDGE: "a relation of a named thing: the graph follows it",
    QuestionShape.COMPARISON: "named things compared: the graph gathers each",
    QuestionShape.LOOKUP: "a look-up of one fact: plain search",
}


@dataclass(frozen=True, slots=True)
class AgentChoice:
    agent_type: str
    shape: QuestionShape
    reason: str


def choose_agent(question: str, kb: KnowledgeBase, available: Collection[str]) -> AgentChoice:
    """The agent for a question by its shape; the KB's default agent when the shape names none it can run."""
    shape = shape_of(question)
    chosen = _FOR_SHAPE.get(shape)
    if chosen is not None and chosen in available:
        return AgentChoice(chosen, shape, _WHY[shape])
    return AgentChoice(kb.default_agent or DEFAULT_AGENT_TYPE, shape, "the knowledge base's default agent")
