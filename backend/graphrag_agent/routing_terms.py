"""Routing terms: what a KB's profile counts and what the router looks up, computed by one function.

A word is folded (lower case, accents removed: "Café" is "cafe") and reduced by the Snowball English stemmer,
so "beekeeping" and "beekeeper" are one term; a handle written in camel case counts as a whole and in parts
("LiHua": lihua, li, hua), so a question that writes the name apart finds it. CJK text, which has no spaces,
counts as single characters and character pairs: whatever word segmentation a question and a passage get,
the pairs of a word are found in a passage that holds it. Stopwords, numerals and overlong strings (hashes, URLs
glued together) name nothing a question asks about; they are left out.

The store counts, per KB, how many chunks hold each term of its documents (`routing_terms` of a chunk's title
and text); the router looks up the terms of a message's words (`word_terms`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

from backend.graphrag_agent.text import STOPWORDS, index_terms, is_cjk

MAX_TERM_CHARS = 40  # a longer "word" is not something a question names
_ACCENTS = re.compile(r"[\u0300-\u036f]")  # combining marks, once a text is decomposed (NFKD)
_stemmer = snowballstemmer.stemmer("english")


def fold(text: str) -> str:
    """Lower-cased, accents removed: "Café" and "cafe" are one word to a router."""
    lowered = text.lower()
    return lowered if lowered.isascii() else _ACCENTS.sub("", unicodedata.normalize("NFKD", lowered))


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(fold(word)))


def routing_terms(text: str) -> frozenset[str]:
    """The distinct routing terms of `text` (a chunk's title and text, or a message)."""
    terms = set()
    for term in set(index_terms(text)):  # words lower-cased with their camel-case parts; CJK 1- and 2-grams
        if len(term) > MAX_TERM_CHARS or term.isdigit() or term in STOPWORDS:
            continue
        terms.add(term if is_cjk(term[0]) else _stem(term))
    return frozenset(terms)


def word_terms(word: str) -> tuple[str, ...]:
    """The routing terms a message's word is looked up by: its stem; for a CJK word its character pairs (or the
    character), so that a word is found in part where segmentation differs ("气候区" half-found in "气候")."""
    if not word or len(word) > MAX_TERM_CHARS or word.isdigit() or word in STOPWORDS:
        return ()
    if not is_cjk(word[0]):
        return (_stem(word),)
    if len(word) == 1:
        return (word,)
    pairs = (word[i : i + 2] for i in range(len(word) - 1))
    return tuple(dict.fromkeys(pair for pair in pairs if pair not in STOPWORDS))
