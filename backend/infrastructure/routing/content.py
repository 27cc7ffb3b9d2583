"""Routing by content (SPEC §4): which knowledge base holds what a message is about.

Keywords and descriptions say what a KB's owner expected to be asked; what a KB can answer is in its chunks.
Each KB is probed with its own fulltext index (a bounded search, so the probe is as current as the index),
and the message's terms are looked for in the best hits. A term counts by how rare it is in general text
(`TermRarity`): names and specific words carry the evidence, everyday words little or none. So "hi", "what is
17×23" or "write a haiku about autumn" find too little evidence anywhere and go to general chat, while a
question naming what a KB holds finds it there.

A KB's evidence is the weight of the message's terms found in its hits; its coverage is the share of the
message's weight found. The default KB needs less evidence than the others. A message that asks to produce
text ("write", "translate", 帮我写) rather than to find it needs more: it is general chat unless it names what a
KB holds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import snowballstemmer  # type: ignore[import-untyped]

from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import IntentGuess, RouteMethod
from backend.graphrag_agent.ports import ChunkIndex
from backend.graphrag_agent.text import cjk_presence, fulltext_query_terms, is_cjk

# The confidence of a guess that just meets both bars below: the default `KB_AUTO_ROUTE_MIN_CONFIDENCE`, so
# raising that setting asks for proportionally more evidence and coverage.
_BAR_CONFIDENCE = 0.75
_MAX_CONFIDENCE = 0.95
_PROBE_CHUNKS = 5  # hits read per KB: enough for a question whose terms sit in two or three passages
# When the message's words together find too little, the KBs are probed again with its specific words alone
# (rarer than about one in ten thousand words).
_PROBE_WEIGHT = 1.0
_MIN_EVIDENCE = 2.5  # rarity-weighted terms found: about one uncommon name, or two specific words
# The KB marked default (or the only one) takes questions that name anything it holds, even one specific word:
# its owner said that questions go there, and there is no other KB to confuse it with.
_DEFAULT_EVIDENCE = 1.0
_MIN_COVERAGE = 0.4  # share of the message's weight found in one KB
_REQUEST_EVIDENCE = 6.0  # a request to produce text goes to a KB only when it names what the KB holds
_SHOWN_TERMS = 4
_MIN_PART = 3  # the shortest part of a compound word looked for on its own
_PROBE_TIMEOUT_S = 2.0  # a KB's index that does not answer by then holds nothing for this message

# Requests to produce or transform text, at the start of a message (after a polite opening).
_POLITE = (
    r"(?:(?:please|pls|kindly|can you|could you|would you|will you|help me(?: to)?|i want you to|i need you to)\s+)*"
)
_PRODUCE_EN = (
    r"write|compose|draft|rewrite|rephrase|paraphrase|translate|summari[sz]e|proofread|generate|invent|"
    r"make up|come up with|tell me a (?:joke|story|poem)|sing"
)
_PRODUCE_ZH = r"(?:请|麻烦|帮我|给我|替我|你能|可以)*(?:写|翻译|总结|概括|改写|润色|编|讲个|讲一个|作一首|创作)"
_PRODUCE = re.compile(rf"^\s*(?:{_POLITE}(?:{_PRODUCE_EN})\b|{_PRODUCE_ZH})", re.IGNORECASE)

# Greetings, thanks and farewells: a message made of these words alone is small talk, whatever a KB holds.
_PHATIC_WORDS = frozenset(
    {
        "hi",
        "hello",
        "hey",
        "hiya",
        "howdy",
        "yo",
        "there",
        "all",
        "everyone",
        "folks",
        "thanks",
        "thank",
        "you",
        "so",
        "much",
        "very",
        "many",
        "cheers",
        "bye",
        "goodbye",
        "see",
        "later",
        "good",
        "morning",
        "afternoon",
        "evening",
        "night",
        "ok",
        "okay",
        "cool",
        "great",
        "nice",
        "fine",
        "sure",
        "welcome",
    }
)
_PHATIC_CJK = re.compile(
    r"^(?:你好|您好|大家好|嗨|哈喽|谢谢|多谢|感谢|谢啦|再见|拜拜|早上好|早安|午安|晚上好|晚安|好的|好|嗯|你|您|啊|呀|哦|了)+$"
)
_PUNCTUATION = re.compile(r"[\W_]+")

_stemmer = snowballstemmer.stemmer("english")
logger = logging.getLogger(__name__)
_CAMEL_CASE = re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z]*\b")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])")
_ACCENTS = re.compile(r"[\u0300-\u036f]")  # combining marks, once a text is decomposed (NFKD)


Compounds = Mapping[str, tuple[str, ...]]  # a message's rare compound words and their two everyday parts


class TermRarity(Protocol):
    """How much a word says about what a message is about, from its frequency in general text."""

    def weight(self, term: str) -> float:
        """0 for everyday words; more the rarer the term is in general text (names, specific words)."""
        ...

    def known(self, term: str) -> bool:
        """Whether general text uses the term at all."""
        ...


@dataclass(frozen=True, slots=True)
class KbEvidence:
    kb_prefix: str
    evidence: float  # rarity-weighted message terms found in the KB's best hits
    coverage: float  # evidence / the message's total weight
    found: tuple[str, ...]  # the message terms found, heaviest first

    def confidence(self, min_evidence: float) -> float:
        if self.evidence <= 0:
            return 0.0
        support = min(self.evidence / min_evidence, self.coverage / _MIN_COVERAGE)
        return round(min(_MAX_CONFIDENCE, _BAR_CONFIDENCE * support), 3)


def asks_to_produce(message: str) -> bool:
    """Does the message ask for text to be written or transformed, rather than for something to be found?"""
    return _PRODUCE.match(message) is not None


def is_small_talk(message: str) -> bool:
    """A greeting, thanks or farewell and nothing else ("hello there", "thanks so much!", "你好")."""
    words = _PUNCTUATION.sub(" ", message.lower()).split()
    if not words:
        return True
    if all(is_cjk(word[0]) for word in words):
        return all(_PHATIC_CJK.match(word) for word in words)
    return all(word in _PHATIC_WORDS for word in words)


def _fold(text: str) -> str:
    """Lower-cased, accents removed: "Café" and "cafe" are one word to a router."""
    lowered = text.lower()
    return lowered if lowered.isascii() else _ACCENTS.sub("", unicodedata.normalize("NFKD", lowered))


@lru_cache(maxsize=16384)
def _word_start(term: str) -> re.Pattern[str]:
    """Finds a word that starts with the term's stem."""
    return re.compile(rf"(?<![^\W_]){re.escape(_stemmer.stemWord(term))}")


class _Passages:
    """The probed hits of one KB, ready for term look-ups."""

    def __init__(self, texts: Iterable[str], compounds: Compounds) -> None:
        self._compounds = compounds
        raw = "\n".join(texts)
        # "LiHua" is also "Li Hua": a question may write a handle's parts apart.
        handles = " ".join(_CAMEL_BOUNDARY.sub(" ", token) for token in _CAMEL_CASE.findall(raw))
        self.text = _fold(f"{raw}\n{handles}")

    def share_found(self, term: str) -> float:
        """1 when the term occurs (a word: any word that starts with its stem, so "beekeeping" finds
        "beekeeper"); for a CJK word, the share of its character pairs that occur (word segmentation of a short
        question and of a passage do not always agree)."""
        if is_cjk(term[0]):
            return cjk_presence(term, self.text)
        return float(self._has(term) or self._has_parts(term))

    def _has(self, word: str) -> bool:
        return _word_start(word).search(self.text) is not None

    def _has_parts(self, term: str) -> bool:
        """A compound whose two parts both occur: "beehives" where a text has "bee…" and "hives"."""
        parts = self._compounds.get(term, ())
        return bool(parts) and all(self._has(part) for part in parts)


class ContentRouter:
    """Implements `IntentDetector`: scores the catalog's KBs by what their indexes hold."""

    def __init__(self, index: ChunkIndex, rarity: TermRarity) -> None:
        self._index = index
        self._rarity = rarity

    async def guess(self, message: str, knowledge_bases: Sequence[KnowledgeBase]) -> IntentGuess:
        terms = [_fold(term) for term in fulltext_query_terms(message) if not term.isdigit()]
        rarity = {term: self._rarity.weight(term) for term in terms if term}
        weighed = [term for term, weight in rarity.items() if weight > 0]
        if not knowledge_bases or not weighed:
            return _nothing("only everyday words: nothing that names what a knowledge base holds")
        if is_small_talk(message):
            return _nothing("a greeting, thanks or farewell")
        producing = asks_to_produce(message)
        default = _default_kb(knowledge_bases)

        def bar(prefix: str) -> float:
            if producing:
                return _REQUEST_EVIDENCE
            return _DEFAULT_EVIDENCE if prefix == default else _MIN_EVIDENCE

        compounds = {term: parts for term in weighed if (parts := self._compound_parts(term))}
        hits = await self._probe(knowledge_bases, weighed, compounds)
        best = self._best(hits, weighed, rarity, compounds, bar)
        specific = [term for term in weighed if rarity[term] >= _PROBE_WEIGHT]
        if best.confidence(bar(best.kb_prefix)) < _BAR_CONFIDENCE and 0 < len(specific) < len(weighed):
            # A KB's own BM25 does not know that "mother" or "law" are everyday words and may rank passages
            # full of them over the one with the name: look again with the specific words alone.
            again = await self._probe(knowledge_bases, specific, compounds)
            hits = {prefix: [*found, *again[prefix]] for prefix, found in hits.items()}
            best = self._best(hits, weighed, rarity, compounds, bar)
        if best.evidence <= 0:
            return _nothing("no knowledge base holds the message's words")
        confidence = best.confidence(bar(best.kb_prefix))
        return IntentGuess(best.kb_prefix, confidence, RouteMethod.HEURISTIC, _reason(best, producing))

    def _compound_parts(self, term: str) -> tuple[str, ...]:
        """The two everyday words a rare English compound is made of ("beehives": bee, hives), or ()."""
        if is_cjk(term[0]) or len(term) < 2 * _MIN_PART:
            return ()
        weight = self._rarity.weight(term)
        for cut in range(_MIN_PART, len(term) - _MIN_PART + 1):
            parts = (term[:cut], term[cut:])
            if all(self._rarity.known(part) and self._rarity.weight(part) < weight for part in parts):
                return parts
        return ()

    async def _probe(
        self, knowledge_bases: Sequence[KnowledgeBase], terms: Sequence[str], compounds: Compounds
    ) -> dict[str, list[str]]:
        """Each KB's best passages for the terms (and the parts of compounds): their titles and texts. A KB whose
        index cannot be read in time holds nothing for routing (logged): general chat must not fail with it."""
        query = " ".join([*terms, *(part for term in terms for part in compounds.get(term, ()))])
        found = await asyncio.gather(*(self._search(kb.kb_prefix, query) for kb in knowledge_bases))
        return {kb.kb_prefix: texts for kb, texts in zip(knowledge_bases, found, strict=True)}

    async def _search(self, kb_prefix: str, query: str) -> list[str]:
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT_S):
                hits = await self._index.search_chunks_fulltext(kb_prefix, query, _PROBE_CHUNKS)
        except Exception as error:  # a store down or slow: routing goes on without this KB's evidence
            logger.warning("routing could not search %s: %s", kb_prefix, type(error).__name__)
            return []
        return [f"{hit.title}\n{hit.text}" for hit in hits]

    def _best(
        self,
        hits: dict[str, list[str]],
        terms: Sequence[str],
        rarity: dict[str, float],
        compounds: Compounds,
        bar: Callable[[str], float],
    ) -> KbEvidence:
        found = {}
        for prefix, texts in hits.items():
            passages = _Passages(texts, compounds)
            found[prefix] = {term: passages.share_found(term) for term in terms}
        # A word neither general text nor any KB knows is most likely a typo: it says nothing either way.
        weights = {
            term: rarity[term]
            for term in terms
            if self._rarity.known(term) or any(shares[term] > 0 for shares in found.values())
        }
        total = sum(weights.values())
        scored = [_evidence(prefix, shares, weights, total) for prefix, shares in found.items()]
        return max(scored, key=lambda e: (e.confidence(bar(e.kb_prefix)), e.evidence, e.coverage))


def _evidence(prefix: str, shares: dict[str, float], weights: dict[str, float], total: float) -> KbEvidence:
    credited = {term: weights[term] * shares[term] for term in weights if shares[term] > 0}
    evidence = sum(credited.values())
    shown = tuple(sorted(credited, key=lambda term: credited[term], reverse=True))
    return KbEvidence(prefix, evidence, evidence / total if total > 0 else 0.0, shown)


def _default_kb(knowledge_bases: Sequence[KnowledgeBase]) -> str:
    if len(knowledge_bases) == 1:
        return knowledge_bases[0].kb_prefix
    return next((kb.kb_prefix for kb in knowledge_bases if kb.is_default), "")


def _nothing(reason: str) -> IntentGuess:
    return IntentGuess("", 0.0, RouteMethod.HEURISTIC, reason)


def _reason(best: KbEvidence, producing: bool) -> str:
    words = ", ".join(best.found[:_SHOWN_TERMS])
    reason = f"{best.kb_prefix} holds {words} ({best.coverage:.0%} of what the message names)"
    return f"{reason}; a request to write text" if producing else reason
