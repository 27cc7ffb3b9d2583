"""Offline follow-ups (SPEC §4): a message that refers back carries the subject of the turns before it.

"Tell me about Coulson Wallop." then "Where did his father study?": the second message names nobody, so
neither routing nor retrieval could find what it is about. When a message refers back (a pronoun or a
demonstrative: he, their, that person, the two, 它, 该) and names no subject of its own (no word rarer than
an uncommon name), the subject of the latest earlier user message that has one is appended to it: the stretch
of that message from its first specific word to its last, as written, widened over adjoining capitalised
words, so a title such as "Changed It" or "Aas Ka Panchhi" is carried whole and keeps the capitals that the
graph agents' name matching reads.
The stored message stays what the user wrote; the decision shows the query that was searched for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.domain.conversation import Message, Role
from backend.domain.routing import QueryMethod, StandaloneQuery
from backend.graphrag_agent.text import fulltext_query_terms, is_cjk
from backend.infrastructure.routing.content import TermRarity

_REFERS_BACK = re.compile(
    r"\b(?:he|she|him|her|his|hers|they|them|their|theirs|it|its|this|that|these|those|one|ones|both|"
    r"former|latter|same|two|there)\b|他|她|它|其|该|此|这|那|两者|二者|前者|后者",
    re.IGNORECASE,
)
_NAMES_A_SUBJECT = 4.0  # a word this rare (a name general text hardly uses) makes a message stand alone
_SPECIFIC = 1.0  # the words carried: rarer than about one in ten thousand words of general text
_TURNS_BACK = 3  # earlier user messages looked at, newest first
# What a follow-up puts in place of its subject, most specific first.
_REFERENCE = re.compile(
    r"\b(?:(?:that|this|the same) (?:person|man|woman|one|film|movie|book|song|album|place|city|country|company|"
    r"band|team|group|work)|the two|both of them|his|her|hers|their|its|him|them|they|he|she|it)\b",
    re.IGNORECASE,
)
_ORDINAL_REFERENCE = re.compile(r"\b(?:the (?:first|second|former|latter)(?: one)?)\b", re.IGNORECASE)
_POSSESSIVES = frozenset({"his", "her", "their", "its"})
_PARTS = re.compile(r"\s+(?:and|or|&)\s+")
_WORD = r"[A-Z0-9][\w'’]*"
_LINK = r"(?:of|the|a|an|and|in|on|at|to|with|for|by|de|la|le|del|von|van|der)"  # inside titles and names
# "Gaby" + ": A True Story", "Inherent Vice" + " (Film)"
_CAPITALISED_AFTER = re.compile(rf":?(?:[ \t]+{_LINK})*[ \t]+{_WORD}|[ \t]*\([^()\n]{{1,40}}\)")
# "Aas Ka" before "Panchhi", "When the" before "Stars"; never the message's first word
_CAPITALISED_BEFORE = re.compile(rf"(?<=[ \t(“\"]){_WORD}:?(?:[ \t]+{_LINK})*[ \t]+$")
_NAME = re.compile(rf"(?<=[ \t(“\"]){_WORD}(?:(?:[ \t]+{_LINK})*[ \t]+{_WORD})*")  # capitalised, after the first word


def refers_back(message: str) -> bool:
    return _REFERS_BACK.search(message) is not None


def _put_in(message: str, subject: str) -> str:
    """The message with the subject in place of what refers to it, so the question keeps its shape ("the
    place of birth of the performer of song Changed It?"); appended when no English reference is found."""
    parts = _PARTS.split(subject, maxsplit=1)
    ordered = list(_ORDINAL_REFERENCE.finditer(message))
    if len(parts) == 2 and len(ordered) == 2:  # "the first one ... the second one", "the former ... the latter"
        out = message
        for reference, part in sorted(zip(ordered, parts, strict=True), key=lambda pair: -pair[0].start()):
            out = out[: reference.start()] + part + out[reference.end() :]
        return out
    found = _REFERENCE.search(message)
    if found is None:
        return f"{message} {subject}"
    stand_in = f"{subject}'s" if found.group(0).lower() in _POSSESSIVES else subject
    return message[: found.start()] + stand_in + message[found.end() :]


class OfflineFollowUps:
    """Implements `FollowUps` without a model."""

    def __init__(self, rarity: TermRarity) -> None:
        self._rarity = rarity

    def needs_context(self, message: str, history: Sequence[Message]) -> bool:
        """Whether the message refers back to earlier turns and names no subject of its own."""
        return bool(history) and refers_back(message) and not self._names_a_subject(message)

    def asks_model(self, message: str, history: Sequence[Message]) -> bool:
        return False

    async def standalone(self, message: str, history: Sequence[Message]) -> StandaloneQuery:
        if not self.needs_context(message, history):
            return StandaloneQuery(message)
        earlier = [turn.content for turn in reversed(history) if turn.role is Role.USER][:_TURNS_BACK]
        for text in earlier:
            carried = self._subject(text)
            if carried:
                return StandaloneQuery(_put_in(message, carried), carried, QueryMethod.OFFLINE)
        return StandaloneQuery(message)

    def _subject(self, text: str) -> str:
        """The stretch of `text` its specific words span, as written ("" when it has none)."""
        lowered = text.lower()
        spans = []
        for term in self._terms(text):
            if self._rarity.weight(term) < _SPECIFIC:
                continue
            pattern = re.escape(term) if is_cjk(term[0]) else rf"(?<![^\W_]){re.escape(term)}(?![^\W_])"
            found = re.search(pattern, lowered)
            if found is not None:
                spans.append(found.span())
        if not spans:  # a name made of everyday words ("Changed It"): its capitals mark it
            name = _NAME.search(text)
            return name.group(0) if name is not None else ""
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        while (before := _CAPITALISED_BEFORE.search(text, 0, start)) is not None:
            start = before.start()
        while (after := _CAPITALISED_AFTER.match(text, end)) is not None:
            end = after.end()
        return text[start:end].strip()

    def _names_a_subject(self, message: str) -> bool:
        """A capitalised name after the first word, or a word general text hardly uses."""
        if _NAME.search(message) is not None:
            return True
        return any(self._rarity.weight(term) >= _NAMES_A_SUBJECT for term in self._terms(message))

    @staticmethod
    def _terms(text: str) -> list[str]:
        return [term for term in fulltext_query_terms(text) if not term.isdigit()]
