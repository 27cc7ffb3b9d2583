"""Language-aware text primitives shared by indexing, retrieval and answer composition.

Two tokenisations of the same text:

- `index_terms`: lower-cased words; CJK text (which has no spaces) as single characters and character
  bigrams. Cheap and independent of word segmentation, it is what the in-process overlap checks compare.
- `fulltext_terms`: lower-cased words; CJK text as jieba words. The fulltext indexes (BM25) use these,
  because BM25 weighs words: character n-grams give every common character of a Chinese question a vote.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# The token estimate and its word / CJK split are defined in the domain (the use cases count tokens too);
# `estimate_tokens` and `is_cjk` are re-exported here with the core's other text primitives.
from backend.domain.tokens import CJK, WORD_OR_CJK_RUN
from backend.domain.tokens import estimate_tokens as estimate_tokens
from backend.domain.tokens import is_cjk as is_cjk
from backend.graphrag_agent.chinese import chinese_words

# `WORD_OR_CJK_RUN` with a group for each kind: (CJK run, "") or ("", word).
_CJK_RUN_OR_WORD = re.compile(rf"([{CJK}]+)|([^\W_{CJK}]+(?:['’][^\W_{CJK}]+)*)", re.UNICODE)
_POSSESSIVE = re.compile(r"'s$", re.IGNORECASE)
_BLOCK_START = re.compile(r"^\s*(?:#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)")
_LIST_NUMBER = re.compile(r"\d{1,3}[.)]")
# The noun a question asks the answer's kind with ("in what year", "which cities", "what type of", "the name of"):
# the passage that answers says 1921, Lyon or margherita, rarely the noun itself.
_ASKED_KIND = re.compile(r"\b(?:what|which)\s+(\w+)|\bthe\s+(name)\s+of\b", re.IGNORECASE)
_KIND_NOUNS = frozenset(
    {"year", "date", "day", "month", "time", "century", "decade", "place", "city", "country", "town", "village"}
    | {"region", "state", "county", "location", "person", "people", "number", "amount", "percentage", "age", "size"}
    | {"name", "kind", "type", "sort"}
)
_CHAT_LINE = re.compile(r"^\s*[^\s:：]{1,40}[:：]\s*\S")  # "Speaker: message", "Time: 20260131_14:00"
# A full stop after an initial ("Robert A. Stemmle"; not "I", a numeral: "Lothair I.") or a title
# ("Dr.", "St.") does not end the sentence, so names keep their parts.
_TITLES = ("Mr", "Ms", "Dr", "St", "Jr", "Sr", "Mt", "vs")
_NOT_AN_END = r"(?<![\s(][A-HJ-Z]\.)" + "".join(rf"(?<!\s{title}\.)" for title in _TITLES)
_SENTENCE_END = re.compile(rf"(?<=[.!?]){_NOT_AN_END}\s+(?=[\"'“(\[]?[A-Z0-9{CJK}])|(?<=[。！？；])")

STOPWORDS: frozenset[str] = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "he",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "about",
        "after",
        "before",
        "any",
        "all",
        "also",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "very",
        "just",
        "not",
        "no",
        "nor",
        "over",
        "under",
        "again",
        "tell",
        "please",
        "know",
        "much",
        "many",
    }
)
# Chinese function and question words: as unigrams and bigrams (`index_terms`) and as jieba words.
_CHINESE_FUNCTION_WORDS = (
    "的 了 是 在 和 与 及 或 被 把 从 对 为 以 于 之 其 这 那 有 也 都 吗 呢 吧 啊 哪 谁 几 "
    "什么 怎么 怎样 如何 为什么 多少 哪个 哪些 哪里 哪儿 哪一 这个 那个 一个 时候 什么样 是否 "
    "又 叫 能 给 我 你 他 她 它 我们 你们 他们 么 可以 由 还 就 会 要 将 所 等 已 已经 并 而 但 "
    "除了 之外 一下 介绍 请问 请 具体 哪一年 哪年 哪位 哪种 多久 多大 多长 分别 主要"
)
_CHINESE_STOPWORDS = frozenset(_CHINESE_FUNCTION_WORDS.split())
STOPWORDS = STOPWORDS | _CHINESE_STOPWORDS


def _cjk_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return list(run) + _bigrams(run)


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def cjk_share(text: str) -> float:
    """Share of CJK characters among the word characters of `text` (0 for text without any)."""
    cjk = latin = 0
    for match in WORD_OR_CJK_RUN.finditer(text):
        token = match.group(0)
        if is_cjk(token):
            cjk += len(token)
        else:
            latin += len(token)
    return cjk / (cjk + latin) if cjk + latin else 0.0


def mostly_cjk(text: str) -> bool:
    """Is `text` mostly CJK? (What an English-only embedding model cannot embed meaningfully.)"""
    return cjk_share(text) >= 0.5


def index_terms(text: str) -> list[str]:
    """Every searchable term of `text`, in order (words lower-cased, CJK as unigrams and bigrams)."""
    return _terms(text, _cjk_terms)


# How a scorer gets a text's distinct index terms: `index_term_set`, or one request's `TermSetCache`.
TermSets = Callable[[str], frozenset[str]]


def index_term_set(text: str) -> frozenset[str]:
    """The distinct `index_terms` of `text`, tokenised anew on every call."""
    return frozenset(index_terms(text))


class TermSetCache:
    """`index_term_set` that tokenises each text once, for the agents fused on one question.

    They score the same chunks and summaries against the question, and tokenising those is the largest Python
    cost of a search. A cache keeps every text it was asked about, so it serves one request: the fusion agent
    makes one per request (`shared_reads.ReadScope`) and hands it to that request's members.
    """

    def __init__(self) -> None:
        self._sets: dict[str, frozenset[str]] = {}

    def __call__(self, text: str) -> frozenset[str]:
        found = self._sets.get(text)
        if found is None:
            found = self._sets[text] = index_term_set(text)
        return found


def fulltext_terms(text: str) -> list[str]:
    """The terms a fulltext index stores for `text`, in order (words lower-cased, CJK runs as jieba words)."""
    return _terms(text, chinese_words)


def _terms(text: str, cjk_run_terms: Callable[[str], Iterable[str]]) -> list[str]:
    # The hot path of query-time overlap scoring: one regex pass, the rarer cases (apostrophes, inner capitals)
    # checked before any work is spent on them.
    terms: list[str] = []
    for cjk_run, word in _CJK_RUN_OR_WORD.findall(text):
        if cjk_run:
            terms.extend(cjk_run_terms(cjk_run))
            continue
        if "'" in word or "’" in word:
            word = _POSSESSIVE.sub("", word.replace("’", "'"))  # "Hua's" is about Hua
        lowered = word.lower()
        terms.append(lowered)
        if word[1:] != lowered[1:]:  # an upper-case letter inside: maybe "LiHua", "GraphRAG"
            parts = _camel_case_parts(word)
            if len(parts) > 1:
                terms.extend(part.lower() for part in parts)
    return terms


def _camel_case_parts(token: str) -> list[str]:
    """ "LiHua" -> Li, Hua; "GraphRAG" -> Graph, RAG; "HTMLParser" -> HTML, Parser; "NASA" -> NASA.

    Chat handles and identifiers join names that questions write apart ("Li Hua"); indexing the parts beside
    the joined word lets either spelling find the other.
    """
    parts: list[str] = []
    start = 0
    for i in range(1, len(token)):
        before, here = token[i - 1], token[i]
        after = token[i + 1] if i + 1 < len(token) else ""
        if here.isupper() and (before.islower() or (before.isupper() and after.islower())):
            parts.append(token[start:i])
            start = i
    parts.append(token[start:])
    return parts


def fulltext_query_terms(query: str) -> list[str]:
    """A question's fulltext terms without stopwords, duplicates and the nouns it asks the answer's kind with."""
    asked = {noun.lower() for nouns in _ASKED_KIND.findall(query) for noun in nouns if _singular(noun) in _KIND_NOUNS}
    return list(dict.fromkeys(t for t in fulltext_terms(query) if t not in STOPWORDS and t not in asked))


def _singular(noun: str) -> str:
    lowered = noun.lower()
    return lowered[:-3] + "y" if lowered.endswith("ies") else lowered.removesuffix("s")


def content_terms(text: str) -> list[str]:
    """Index terms without stopwords and duplicates: what a query is really about."""
    seen: dict[str, None] = {}
    for term in index_terms(text):
        if term not in STOPWORDS and term not in seen:
            seen[term] = None
    return list(seen)


def _blocks(paragraph: str) -> list[str]:
    """Lines of a paragraph grouped so that each heading or list item starts a block of its own."""
    blocks: list[list[str]] = []
    for line in paragraph.splitlines():
        if not blocks or _BLOCK_START.match(line):
            blocks.append([])
        blocks[-1].append(line)
    return [" ".join(" ".join(block).split()) for block in blocks]


def is_chat(text: str) -> bool:
    """Is `text` a chat log: at least half of its lines (two or more, blank ones aside) are `Speaker: message`?"""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) >= 2 and 2 * sum(1 for line in lines if _CHAT_LINE.match(line)) >= len(lines)


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (Latin and CJK punctuation).

    Blank lines, markdown headings and list items always end a sentence, so a bullet list becomes
    one sentence per item rather than one run-on sentence.
    """
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        for block in _blocks(paragraph):
            parts = [part.strip() for part in _SENTENCE_END.split(block) if part.strip()]
            # "1." followed by a capitalised word looks like a sentence end; it is a list number.
            sentences.extend(rejoin_after(parts, _LIST_NUMBER.fullmatch))
    return sentences


def rejoin_after(parts: list[str], unfinished: Callable[[str], object]) -> list[str]:
    """`parts` with each part joined (by a space) to the one before it while that one is `unfinished`."""
    joined: list[str] = []
    for part in parts:
        if joined and unfinished(joined[-1]):
            joined[-1] = f"{joined[-1]} {part}"
        else:
            joined.append(part)
    return joined


def overlap_score(query_terms: Iterable[str], text: str, term_sets: TermSets = index_term_set) -> float:
    """How much of the query's terms `text` holds (0..1): a word counts when present; a CJK term by the share
    of its character bigrams present, whatever the segmentation ("气候区" half-found in "气候" text).

    `term_sets` gives the text's words (a request's `TermSetCache` when the text is scored more than once)."""
    wanted = set(query_terms)
    if not wanted:
        return 0.0
    words = term_sets(text)
    lowered = text.lower()
    found = sum(cjk_presence(term, lowered) if is_cjk(term) else float(term in words) for term in wanted)
    return found / len(wanted)


def cjk_presence(term: str, text: str) -> float:
    """1 when the CJK term occurs in `text`, else the share of its character bigrams that do."""
    if term in text:
        return 1.0
    pieces = _bigrams(term) or [term]
    return sum(piece in text for piece in pieces) / len(pieces)
