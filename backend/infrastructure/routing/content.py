"""Routing by content (SPEC §4): which knowledge base holds what a message is about.

Keywords and descriptions say what a KB's owner expected to be asked; what a KB can answer is in its chunks.
Each KB has a profile, kept by the store in the transaction that writes or deletes a document: how many
chunks it holds and, for each routing term (`routing_terms.py`: stemmed words, CJK characters and pairs), how
many of them hold it. One read gives the profile of every KB for a message's terms, whatever the KBs' size.

A term counts by how rare it is in general text (`TermRarity`): names and specific words carry the evidence,
everyday words little or none. So "hi", "what is 17×23" or "write a haiku about autumn" find too little
evidence anywhere and go to general chat, while a question naming what a KB holds finds it there.

A KB is credited with a term by its salience there: how much more often the KB's chunks hold it than chunks of
general text would, the share of chunks holding it against the chance that a chunk of general text of the same
length holds it (`TermRarity.frequency`, a word's rate in general text). A KB that uses a word no more than
general text does ("sad", "boil", "egg" in a year of chat logs) says nothing by holding it; a word the KB uses
many times more often than general text does, or a name general text hardly uses, is credited in full. Between
the two the credit grows with the logarithm of the salience. This is a likelihood ratio of the KB's chunks
against general text, per term, rather than a ranking of KBs against each other (CORI, Callan et al. 1995,
scores a collection's document frequency against the other collections): the router must also tell that a
message belongs to no KB, and general text, not the other KBs, is what that is measured against. The profile
knows where a KB holds a term, not whether a message's terms occur together; salience stands in for that.

A KB's evidence is the weight of the message's terms it is credited with; its coverage is the share of the
message's weight credited. The default KB needs less evidence than the others. A message that asks to produce
text ("write", "translate", 帮我写) rather than to find it needs more: it is general chat unless it names what a
KB holds.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import IntentGuess, RouteMethod
from backend.graphrag_agent.ports import ChunkIndex, TermCounts, TermProfiles
from backend.graphrag_agent.routing_terms import fold, word_terms
from backend.graphrag_agent.text import fulltext_query_terms, is_cjk

# The confidence of a guess that just meets both bars below: the default `KB_AUTO_ROUTE_MIN_CONFIDENCE`, so
# raising that setting asks for proportionally more evidence and coverage.
_BAR_CONFIDENCE = 0.75
_MAX_CONFIDENCE = 0.95
_MIN_EVIDENCE = 2.5  # rarity-weighted terms credited: about one uncommon name, or two specific words
# The KB marked default (or the only one) takes questions that name anything it holds, even one specific word:
# its owner said that questions go there, and there is no other KB to confuse it with.
_DEFAULT_EVIDENCE = 1.0
_MIN_COVERAGE = 0.4  # share of the message's weight credited to one KB
_REQUEST_EVIDENCE = 6.0  # a request to produce text goes to a KB only when it names what the KB holds
_CHUNK_WORDS = 150  # the length of a chunk, in words, that general text is compared with
_FULL_SALIENCE = 10.0  # a KB whose chunks hold a term this many times more often than general text: full credit
_PROBED_KBS = 2  # KBs whose fulltext index is searched when no profile is salient enough: the likeliest
_PROBE_WORDS = 3  # the message's words searched for: the rarest in the KBs (`_rarest`)
_PROBE_CHUNKS = 5  # hits read per probed KB: enough for a question whose terms sit in two or three passages
_SHOWN_TERMS = 4
_MIN_PART = 3  # the shortest part of a compound word looked for on its own
_READ_TIMEOUT_S = 2.0  # a profile or index that cannot be read by then holds nothing for this message

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

logger = logging.getLogger(__name__)
_CAMEL_CASE = re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z]*\b")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])")

Compounds = Mapping[str, tuple[str, ...]]  # a message's rare compound words and their two everyday parts
Rank = tuple[float, float, float]  # a KB's (confidence, evidence, coverage) for a message: the higher the likelier


class KbContents(TermProfiles, ChunkIndex, Protocol):
    """What the router reads of the KBs: their profiles, and the fulltext index of the likeliest."""


class TermRarity(Protocol):
    """How much a word says about what a message is about, from its frequency in general text."""

    def weight(self, term: str) -> float:
        """0 for everyday words; more the rarer the term is in general text (names, specific words)."""
        ...

    def known(self, term: str) -> bool:
        """Whether general text uses the term at all."""
        ...

    def frequency(self, term: str) -> float:
        """The term's share of the words of general text (a floor for a word general text never uses)."""
        ...


@dataclass(frozen=True, slots=True)
class KbEvidence:
    kb_prefix: str
    evidence: float  # rarity-weighted message terms credited to the KB
    coverage: float  # evidence / the message's total weight
    found: tuple[str, ...]  # the message terms credited, heaviest first

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


def salience_credit(chunks_holding: int, chunks: int, frequency: float) -> float:
    """The share (0..1) of a term's weight a KB is credited with: 0 when its chunks hold the term no more often
    than chunks of general text would, 1 from `_FULL_SALIENCE` times as often, by the logarithm between."""
    if chunks_holding <= 0 or chunks <= 0:
        return 0.0
    expected = -math.expm1(-_CHUNK_WORDS * frequency)  # the chance a chunk of general text holds the term
    salience = (chunks_holding / chunks) / expected
    return min(1.0, max(0.0, math.log(salience) / math.log(_FULL_SALIENCE)))


# The share (0..1) of a routing term's weight a KB is credited with, given the term's general-text frequency.
KeyShare = Callable[[str, float], float]


def _salient(counts: TermCounts) -> KeyShare:
    return lambda key, frequency: salience_credit(counts.frequencies.get(key, 0), counts.chunks, frequency)


def _held(keys: Container[str]) -> KeyShare:
    return lambda key, _: float(key in keys)


def _in_passages(texts: Sequence[str]) -> KeyShare:
    """A word held where a passage has a word that starts with its stem (as the profile cannot tell: "bee" in
    "beekeeper"), a CJK term where a passage has it. The passages are folded once and searched per term, which
    costs less than taking each passage apart into its routing terms."""
    raw = "\n".join(texts)
    # "LiHua" is also "Li Hua": a question may write a handle's parts apart.
    handles = " ".join(_CAMEL_BOUNDARY.sub(" ", token) for token in _CAMEL_CASE.findall(raw))
    text = fold(f"{raw}\n{handles}")

    def share(key: str, _: float) -> float:
        return float(key in text if is_cjk(key[0]) else _word_start(key).search(text) is not None)

    return share


@lru_cache(maxsize=16384)
def _word_start(stem: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\W_]){re.escape(stem)}")


def _either(first: KeyShare, second: KeyShare) -> KeyShare:
    return lambda key, frequency: max(first(key, frequency), second(key, frequency))


@dataclass(frozen=True, slots=True)
class _Message:
    """A message's weighed terms, ready to be credited to a KB."""

    weights: Mapping[str, float]  # term → weight; words no KB and no general text knows are left out (typos)
    compounds: Compounds
    rarity: TermRarity

    def evidence(self, prefix: str, share: KeyShare) -> KbEvidence:
        credited = {
            term: weight * found for term, weight in self.weights.items() if (found := self._share(term, share))
        }
        evidence = sum(credited.values())
        total = sum(self.weights.values())
        shown = tuple(sorted(credited, key=lambda term: credited[term], reverse=True))
        return KbEvidence(prefix, evidence, evidence / total if total > 0 else 0.0, shown)

    def words(self) -> list[str]:
        """The words to look for: the terms, and the parts of compounds."""
        return [*self.weights, *(part for term in self.weights for part in self.compounds.get(term, ()))]

    def _share(self, term: str, share: KeyShare) -> float:
        """A word by its routing term (or, for a compound the KB lacks, the lesser of its two parts: "beehives"
        where the KB says "bee" and "hives"); a CJK word by the mean over its character pairs (segmentation of a
        short question and of a passage do not always agree)."""
        keys = word_terms(term)
        if is_cjk(term[0]):
            return sum(share(key, self.rarity.frequency(key)) for key in keys) / len(keys)
        found = share(keys[0], self.rarity.frequency(term))
        parts = self.compounds.get(term, ())
        if found > 0 or not parts:
            return found
        return min(share(word_terms(part)[0], self.rarity.frequency(part)) for part in parts)


class ContentRouter:
    """Implements `IntentDetector`: scores the catalog's KBs by their profiles, then probes the likeliest."""

    def __init__(self, store: KbContents, rarity: TermRarity) -> None:
        self._store = store
        self._rarity = rarity

    async def guess(self, message: str, knowledge_bases: Sequence[KnowledgeBase]) -> IntentGuess:
        terms = [fold(term) for term in fulltext_query_terms(message) if not term.isdigit()]
        rarity = {term: self._rarity.weight(term) for term in terms if term and word_terms(term)}
        weighed = [term for term, weight in rarity.items() if weight > 0]
        if not knowledge_bases or not weighed:
            return _nothing("only everyday words: nothing that names what a knowledge base holds")
        if is_small_talk(message):
            return _nothing("a greeting, thanks or farewell")
        producing = asks_to_produce(message)
        default = _default_kb(knowledge_bases)

        def rank(e: KbEvidence) -> Rank:
            bar = _REQUEST_EVIDENCE if producing else _DEFAULT_EVIDENCE if e.kb_prefix == default else _MIN_EVIDENCE
            return (e.confidence(bar), e.evidence, e.coverage)

        compounds = {term: parts for term in weighed if (parts := self._compound_parts(term))}
        profiles = await self._read(knowledge_bases, [*weighed, *(p for parts in compounds.values() for p in parts)])
        held = [counts.frequencies for counts in profiles.values()]
        known = {t: rarity[t] for t in weighed if self._rarity.known(t) or any(_holds(h, t) for h in held)}
        said = _Message(known, compounds, self._rarity)
        best = await self._best(said, profiles, rank)
        if best.evidence <= 0:
            return _nothing("no knowledge base holds the message's words")
        confidence = rank(best)[0]
        return IntentGuess(best.kb_prefix, confidence, RouteMethod.HEURISTIC, _reason(best, producing))

    async def _best(
        self, said: _Message, profiles: Mapping[str, TermCounts], rank: Callable[[KbEvidence], Rank]
    ) -> KbEvidence:
        """The KB the message most likely belongs to. One that holds the message's words more often than general
        text does, and is the only one to hold enough of them, is taken at once. Otherwise the likeliest (those
        that hold enough of the words somewhere, the more salient first) are probed: does a KB hold the words
        together, in its best passages for them? Of two that do, the one whose chunks hold them more often."""
        salient = {prefix: said.evidence(prefix, _salient(counts)) for prefix, counts in profiles.items()}
        holding = {prefix: said.evidence(prefix, _held(counts.frequencies)) for prefix, counts in profiles.items()}
        enough = [prefix for prefix, e in holding.items() if rank(e)[0] >= _BAR_CONFIDENCE]
        if len(enough) == 1 and rank(salient[enough[0]])[0] >= _BAR_CONFIDENCE:
            return salient[enough[0]]
        likeliest = sorted(
            (prefix for prefix, e in holding.items() if e.evidence > 0),
            key=lambda prefix: (prefix in enough, rank(salient[prefix]), rank(holding[prefix])),
        )[-_PROBED_KBS:]
        if not likeliest:
            return max(salient.values(), key=rank)
        hits = await self._probe(likeliest, _rarest(said.words(), profiles.values()))
        probed = [said.evidence(p, _either(_salient(profiles[p]), _in_passages(hits[p]))) for p in likeliest]
        return max(probed, key=lambda e: (rank(e)[0] >= _BAR_CONFIDENCE, salient[e.kb_prefix].evidence, rank(e)))

    def _compound_parts(self, term: str) -> tuple[str, ...]:
        """The two everyday words a rare English compound is made of ("beehives": bee, hives), or ()."""
        if is_cjk(term[0]) or len(term) < 2 * _MIN_PART:
            return ()
        weight = self._rarity.weight(term)
        for cut in range(_MIN_PART, len(term) - _MIN_PART + 1):
            parts = (term[:cut], term[cut:])
            if all(
                self._rarity.known(part) and self._rarity.weight(part) < weight and word_terms(part) for part in parts
            ):
                return parts
        return ()

    async def _read(self, knowledge_bases: Sequence[KnowledgeBase], words: Sequence[str]) -> dict[str, TermCounts]:
        """Each KB's profile for the words' routing terms, in one read. Profiles that cannot be read in time hold
        nothing for routing (logged): general chat must not fail with them."""
        keys = list(dict.fromkeys(key for word in words for key in word_terms(word)))
        prefixes = [kb.kb_prefix for kb in knowledge_bases]
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                found = await self._store.term_frequencies(prefixes, keys)
        except Exception as error:  # a store down or slow: routing goes on without the profiles
            logger.warning("routing could not read the KB profiles: %s", type(error).__name__)
            found = {}
        return {prefix: found.get(prefix, TermCounts(0, {})) for prefix in prefixes}

    async def _probe(self, prefixes: Sequence[str], words: Sequence[str]) -> dict[str, list[str]]:
        """Each KB's best passages for the words: their titles and texts."""
        query = " ".join(words)
        found = await asyncio.gather(*(self._search(prefix, query) for prefix in prefixes))
        return dict(zip(prefixes, found, strict=True))

    async def _search(self, kb_prefix: str, query: str) -> list[str]:
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                hits = await self._store.search_chunks_fulltext(kb_prefix, query, _PROBE_CHUNKS)
        except Exception as error:  # an index down or slow: the KB keeps what its profile says
            logger.warning("routing could not search %s: %s", kb_prefix, type(error).__name__)
            return []
        return [f"{hit.title}\n{hit.text}" for hit in hits]


def _rarest(words: Sequence[str], profiles: Collection[TermCounts]) -> list[str]:
    """The `_PROBE_WORDS` words the fewest chunks of all the KBs hold (a word none holds finds nothing): a search
    reads every chunk that holds any of its words, so those ones cost least, and the passages that hold them
    tell whether the message's other words go with them."""
    held = {word: sum(max(p.frequencies.get(key, 0) for key in word_terms(word)) for p in profiles) for word in words}
    return sorted((word for word in words if held[word] > 0), key=lambda word: held[word])[:_PROBE_WORDS]


def _holds(keys: Container[str], term: str) -> bool:
    return any(key in keys for key in word_terms(term))


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
