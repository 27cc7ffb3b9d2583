"""Offline follow-ups (SPEC §4): a message that refers back carries the subject of the turns before it.

"Tell me about Coulson Wallop." then "Where did his father study?": the second message names nobody, so
neither routing nor retrieval could find what it is about. When a message refers back (a pronoun or a
demonstrative: he, their, that person, the two, 它, 该) and names no subject of its own (no word rarer than
an uncommon name), the specific words of the latest earlier user message that has any are appended to it.
The stored message stays what the user wrote; the decision shows the query that was searched for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.domain.conversation import Message, Role
from backend.domain.routing import StandaloneQuery
from backend.graphrag_agent.text import fulltext_query_terms
from backend.infrastructure.routing.content import TermRarity

_REFERS_BACK = re.compile(
    r"\b(?:he|she|him|her|his|hers|they|them|their|theirs|it|its|this|that|these|those|one|ones|both|"
    r"former|latter|same|two|there)\b|他|她|它|其|该|此|这|那|两者|二者|前者|后者",
    re.IGNORECASE,
)
_NAMES_A_SUBJECT = 2.5  # a word this rare (an uncommon name) makes a message stand alone
_SPECIFIC = 1.0  # the words carried: rarer than about one in ten thousand words of general text
_TURNS_BACK = 3  # earlier user messages looked at, newest first


def refers_back(message: str) -> bool:
    return _REFERS_BACK.search(message) is not None


class OfflineFollowUps:
    """Implements `FollowUps` without a model."""

    def __init__(self, rarity: TermRarity) -> None:
        self._rarity = rarity

    def standalone(self, message: str, history: Sequence[Message]) -> StandaloneQuery:
        if not history or not refers_back(message) or self._names_a_subject(message):
            return StandaloneQuery(message)
        earlier = [turn.content for turn in reversed(history) if turn.role is Role.USER][:_TURNS_BACK]
        for text in earlier:
            subject = [term for term in self._terms(text) if self._rarity.weight(term) >= _SPECIFIC]
            if subject:
                carried = " ".join(subject)
                return StandaloneQuery(f"{message} {carried}", carried)
        return StandaloneQuery(message)

    def _names_a_subject(self, message: str) -> bool:
        return any(self._rarity.weight(term) >= _NAMES_A_SUBJECT for term in self._terms(message))

    @staticmethod
    def _terms(text: str) -> list[str]:
        return [term for term in fulltext_query_terms(text) if not term.isdigit()]
