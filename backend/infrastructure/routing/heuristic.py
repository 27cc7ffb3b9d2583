"""Keyword and description matching against the KB registry: fast, offline, explainable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import IntentGuess, RouteMethod
from backend.graphrag_agent.text import content_terms, index_terms, is_cjk

# At or above this the heuristic is trusted and no model is asked.
CONFIDENT = 0.75


@dataclass(frozen=True, slots=True)
class _Score:
    kb_prefix: str
    keyword_hits: tuple[str, ...]
    description_overlap: int

    @property
    def value(self) -> float:
        return len(self.keyword_hits) + 0.25 * self.description_overlap


def _keyword_matches(keyword: str, message_lower: str, message_terms: set[str]) -> bool:
    keyword = keyword.strip().lower()
    if not keyword:
        return False
    if is_cjk(keyword.replace(" ", "")):
        return keyword in message_lower
    terms = index_terms(keyword)
    return bool(terms) and all(term in message_terms for term in terms)


def _score(kb: KnowledgeBase, message_lower: str, message_terms: set[str], message_content: set[str]) -> _Score:
    hits = tuple(kw for kw in kb.keywords if _keyword_matches(kw, message_lower, message_terms))
    overlap = len(message_content.intersection(content_terms(kb.description)))
    return _Score(kb.kb_prefix, hits, overlap)


def _confidence(best: _Score, runner_up: _Score | None) -> float:
    if best.keyword_hits:
        confidence = min(0.95, 0.55 + 0.2 * len(best.keyword_hits) + 0.05 * best.description_overlap)
    else:
        confidence = min(0.5, 0.1 * best.description_overlap)
    if runner_up is not None and runner_up.value >= best.value:
        confidence *= 0.6  # a tie between KBs is not a decision
    return round(confidence, 3)


def detect_intent(message: str, knowledge_bases: Sequence[KnowledgeBase]) -> IntentGuess:
    """Score every KB's keywords and description against the message."""
    message_lower = message.lower()
    message_terms = set(index_terms(message))
    message_content = set(content_terms(message))
    scores = sorted(
        (_score(kb, message_lower, message_terms, message_content) for kb in knowledge_bases),
        key=lambda score: score.value,
        reverse=True,
    )
    if not scores or scores[0].value == 0:
        return IntentGuess("", 0.0, RouteMethod.HEURISTIC, "no knowledge base keyword or topic matched")
    best = scores[0]
    runner_up = scores[1] if len(scores) > 1 else None
    return IntentGuess(best.kb_prefix, _confidence(best, runner_up), RouteMethod.HEURISTIC, _reason(best))


def _reason(score: _Score) -> str:
    if score.keyword_hits:
        shown = ", ".join(score.keyword_hits[:3])
        return f"matched {score.kb_prefix} keywords: {shown}"
    return f"{score.description_overlap} word(s) in common with the {score.kb_prefix} description"
