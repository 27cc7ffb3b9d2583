"""Cited and consulted sources: the citation markers of an answer, renumbered in order of first use.

An answer is written against numbered sources: the evidence a model was given, or the passages the extractive
answerer quotes, count from 1 in rank order. Its text cites them with markers: `[2]`, `[2][5]`, `[2, 5]`. The
sources the text cites are its citations, renumbered 1..k in the order the text first cites them; the others
were consulted and not cited. A marker is rewritten as the text streams, so the client never sees a number
that changes later; a list marker becomes one marker per source (`[2, 5]` → `[1][2]`). A bracket whose
numbers are not all sources (`[1990]`, `[9]` of eight sources) is text and stays as written.

A marker may arrive split across model deltas (`[`, `2`, `]`): the end of a delta that may begin a marker is
held back and sent with the next delta, or when the answer ends (`flush`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.domain.conversation import Citation

_MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;，]\s*\d{1,3})*)\]")
_NUMBER = re.compile(r"\d+")
_OPEN = re.compile(r"\[[\d\s,;，]*")  # what may still become a marker
_MAX_HELD = 24  # longer than any marker of up to a handful of sources: no longer a marker, sent as text


class CitationMarkers:
    """The markers of one answer, against its numbered sources. Not shared between answers."""

    def __init__(self, sources: Sequence[Citation]) -> None:
        self._sources = tuple(sources)
        self._cited: dict[int, int] = {}  # source number → citation number
        self._held = ""

    @property
    def sources(self) -> tuple[Citation, ...]:
        return self._sources

    @property
    def cited(self) -> tuple[Citation, ...]:
        """The sources the text cites so far, in citation-number order."""
        return tuple(self._sources[number - 1] for number in self._cited)

    @property
    def consulted(self) -> tuple[Citation, ...]:
        """The sources the text does not cite, in rank order."""
        return tuple(source for number, source in enumerate(self._sources, 1) if number not in self._cited)

    def feed(self, text: str) -> str:
        """`text` with its markers renumbered; what may begin a marker at its end is kept for the next call."""
        if not self._held and "[" not in text:  # most deltas
            return text
        text = self._held + text
        start = text.rfind("[")
        if start >= 0 and len(text) - start <= _MAX_HELD and _OPEN.fullmatch(text, start):
            text, self._held = text[:start], text[start:]
        else:
            self._held = ""
        return _MARKER.sub(self._renumbered, text)

    def flush(self) -> str:
        """What is held back, once the answer has ended: an unclosed bracket is text."""
        held, self._held = self._held, ""
        return held

    def renumber(self, text: str) -> str:
        """A whole answer's text, renumbered."""
        return self.feed(text) + self.flush()

    def _renumbered(self, marker: re.Match[str]) -> str:
        numbers = [int(number) for number in _NUMBER.findall(marker.group(1))]
        if not all(1 <= number <= len(self._sources) for number in numbers):
            return marker.group(0)
        for number in numbers:
            self._cited.setdefault(number, len(self._cited) + 1)
        return "".join(f"[{self._cited[number]}]" for number in dict.fromkeys(numbers))
