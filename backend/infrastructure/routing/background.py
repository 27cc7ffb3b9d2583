"""`TermRarity` from wordfreq: word frequencies of general English and Chinese text, installed with the package.

wordfreq (Apache-2.0 code, CC BY-SA 4.0 data) merges Wikipedia, subtitles, news, books and web text into one
frequency per word; its lists ship inside the wheel, so nothing is fetched at run time.
"""

from __future__ import annotations

import math
from functools import lru_cache

import wordfreq

from backend.graphrag_agent.text import is_cjk

# A word at or above this frequency (about one in a thousand running words: "the", "what", "year") says nothing
# about a topic; below it, each factor of ten rarer adds one to its weight.
_EVERYDAY = 1e-3
_FLOOR = 1e-9  # the weight of a word general text never uses: as rare as a word can be


def _language(term: str) -> str:
    return "zh" if is_cjk(term[0]) else "en"


@lru_cache(maxsize=65536)
def _frequency(term: str) -> float:
    language = _language(term)
    listed = wordfreq.get_frequency_dict(language).get(term)
    if listed is not None:
        return float(listed)
    if language == "en":
        return 0.0  # a word the list lacks: wordfreq's own look-up, which re-tokenises the word, says the same
    return float(wordfreq.word_frequency(term, language))  # combines the parts of a word jieba split apart


class WordfreqRarity:
    """Implements `TermRarity`."""

    def weight(self, term: str) -> float:
        return max(0.0, math.log10(_EVERYDAY / self.frequency(term)))

    def known(self, term: str) -> bool:
        return _frequency(term) > 0

    def frequency(self, term: str) -> float:
        return max(_frequency(term), _FLOOR)

    @staticmethod
    def warm_up() -> None:
        """Load both word lists (and wordfreq's Chinese segmenter, about a second) now, not on a first message."""
        _frequency("knowledge")
        _frequency("知识")
