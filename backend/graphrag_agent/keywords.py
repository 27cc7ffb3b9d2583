"""Query keywords at two levels, as LightRAG uses them.

Low-level keywords name specific things (people, places, titles, numbers, quoted phrases) and are
looked up as entities; high-level keywords are the themes and concepts of the question and are
matched against community summaries and passages. An offline extractor reads them off the surface
of the question; an LLM extractor asks the model and falls back to the offline one when it fails.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Protocol

from backend.domain.conversation import Message, Role
from backend.graphrag_agent.model import MODEL_FAILURES, CompletionModel, parse_json_object, string_list
from backend.graphrag_agent.text import STOPWORDS, content_terms, is_cjk

logger = logging.getLogger(__name__)

MAX_KEYWORDS = 8

_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|「([^」]{1,40})」|『([^』]{1,40})』|«([^»]{2,80})»")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:/-]\d+)*(?![\w])")
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W_]+)*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")
# Function words and question words that split a CJK run into content pieces (no segmenter offline).
_CJK_SPLIT = re.compile(
    r"什么|为什么|怎么|如何|哪里|哪个|哪些|多少|是否|的|是|了|在|和|与|及|吗|呢|吧|把|被|对|从|谁|几"
)
# Lower-case words that continue a capitalised name: "Ermengarde of Tours", "Ludwig van Beethoven".
_NAME_CONNECTORS = frozenset({"of", "the", "de", "del", "della", "di", "da", "du", "la", "le", "von", "van", "der"})
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Keywords:
    low_level: tuple[str, ...] = ()
    high_level: tuple[str, ...] = ()


class KeywordExtractor(Protocol):
    async def extract(self, query: str) -> Keywords: ...


class OfflineKeywordExtractor:
    """Reads keywords off the question's surface; no model, no I/O."""

    async def extract(self, query: str) -> Keywords:
        return extract_keywords(query)


def extract_keywords(query: str) -> Keywords:
    """Low level: quoted phrases, capitalised names, numbers, CJK pieces. High level: the other content terms."""
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(query)]
    unquoted = _QUOTED.sub(" , ", query)
    names = capitalised_phrases(unquoted)
    numbers = _NUMBER.findall(unquoted)
    cjk = _cjk_pieces(unquoted)
    low = _dedupe([*quoted, *names, *numbers, *cjk])
    named = {term for phrase in low for term in content_terms(phrase)}
    terms = (_POSSESSIVE.sub("", term) for term in content_terms(unquoted))
    themes = [t for t in terms if len(t) > 1 and t not in named and not is_cjk(t) and not t.isdigit()]
    return Keywords(tuple(low[:MAX_KEYWORDS]), tuple(_dedupe([*themes, *cjk])[:MAX_KEYWORDS]))


def capitalised_phrases(text: str) -> list[str]:
    """Runs of capitalised words (joined by name connectors) that are not just a sentence's first word."""
    phrases: list[str] = []
    current: list[re.Match[str]] = []
    previous_end = 0
    for match in _WORD.finditer(text):
        gap = text[previous_end : match.start()]
        if current and (gap.strip() not in ("", "-") or not _continues(match.group(0))):
            phrases.extend(_close(text, current))
            current = []
        if current or _starts_name(text, match):
            current.append(match)
        previous_end = match.end()
    phrases.extend(_close(text, current))
    return _dedupe(phrases)


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper()


def _continues(word: str) -> bool:
    return _is_capitalised(word) or word in _NAME_CONNECTORS


def _starts_name(text: str, match: re.Match[str]) -> bool:
    word = match.group(0)
    if not _is_capitalised(word):
        return False
    return not (_at_sentence_start(text, match) and word.lower() in STOPWORDS)


def _close(text: str, words: list[re.Match[str]]) -> list[str]:
    """The phrase spanned by `words`, minus trailing connectors and a final possessive."""
    while words and not _is_capitalised(words[-1].group(0)):
        words = words[:-1]
    if not words:
        return []
    phrase = _POSSESSIVE.sub("", text[words[0].start() : words[-1].end()])
    # A lone sentence-initial word ("Summarise ...") is more likely an instruction than a name; after a
    # colon it starts a name's second part as often ("Wrong Turn 5: Bloodlines").
    if len(words) == 1 and _opens_sentence(text, words[0]):
        return []
    return [phrase]


def _at_sentence_start(text: str, match: re.Match[str]) -> bool:
    before = text[: match.start()].rstrip()
    return not before or before[-1] in ".?!:;"


def _opens_sentence(text: str, match: re.Match[str]) -> bool:
    before = text[: match.start()].rstrip()
    return not before or before[-1] in ".?!"


def _cjk_pieces(text: str) -> list[str]:
    pieces = (piece for run in _CJK_RUN.findall(text) for piece in _CJK_SPLIT.split(run))
    return [piece for piece in pieces if len(piece) >= 2]


def _dedupe(items: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(item.strip().casefold(), item.strip())
    return [item for key, item in seen.items() if key]


KEYWORD_PROMPT = """You extract search keywords from a user's question for a knowledge-graph retriever.
Return only a JSON object: {"high_level_keywords": [...], "low_level_keywords": [...]}.
- low_level_keywords: the specific entities, names, titles, places, dates and numbers, as written.
- high_level_keywords: the broader themes, concepts or relations the question is about.
Use at most 8 keywords per list, in the language of the question. Do not answer the question."""


class LlmKeywordExtractor:
    """Keywords from a language model; the offline extractor when the model fails or answers badly."""

    def __init__(
        self, model: CompletionModel, fallback: KeywordExtractor | None = None, timeout_s: float = 10.0
    ) -> None:
        self._model = model
        self._fallback = fallback or OfflineKeywordExtractor()
        self._timeout_s = timeout_s

    async def extract(self, query: str) -> Keywords:
        messages = [Message(Role.SYSTEM, KEYWORD_PROMPT), Message(Role.USER, query)]
        try:
            async with asyncio.timeout(self._timeout_s):
                answer = await self._model.complete(messages)
        except MODEL_FAILURES as error:
            logger.warning("keyword model failed (%s); using offline keywords", error)
            return await self._fallback.extract(query)
        keywords = parse_keywords(answer)
        if keywords is None:
            logger.warning("keyword model answered without usable JSON; using offline keywords")
            return await self._fallback.extract(query)
        return keywords


def parse_keywords(answer: str) -> Keywords | None:
    """Keywords from the model's JSON answer; None when it holds none."""
    raw = parse_json_object(answer)
    if raw is None:
        return None
    low = string_list(raw.get("low_level_keywords"), MAX_KEYWORDS)
    high = string_list(raw.get("high_level_keywords"), MAX_KEYWORDS)
    return Keywords(tuple(low), tuple(high)) if low or high else None
