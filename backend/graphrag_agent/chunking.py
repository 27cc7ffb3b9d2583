"""Token-aware chunking that prefers paragraph and sentence boundaries.

Each chunk is an exact slice of the source text (`text[start:end]`), so offsets can be used for
citations and nothing but the whitespace between chunks is ever dropped. Sentences come from
`split_sentences` (Latin and CJK punctuation); a sentence longer than the budget is cut hard, at a
clause mark or space when one is near the cut. In a chat log (`is_chat`) each message is a paragraph,
and a chunk's overlap starts at a message's first line: a chunk never opens with words whose speaker
it does not show.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from backend.graphrag_agent.text import estimate_tokens, is_chat, split_sentences

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
# The smallest pieces a long sentence is cut into: one CJK character or one space-free run.
_ATOM = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_CLAUSE_END = frozenset(",;:，、；：)）」』")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of a document: `text == source[start:end]`, `ordinal` counts from 0."""

    ordinal: int
    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Unit:
    """A sentence (or a hard-cut piece of an over-long one) located in the source text."""

    start: int
    end: int
    tokens: int
    starts_paragraph: bool
    is_heading: bool
    whole: bool = True  # False for a hard-cut piece, which never travels as overlap
    opens: bool = True  # can open a chunk: in a chat log, only the first sentence of a message (it shows who)


def chunk_text(text: str, max_tokens: int = 300, overlap_tokens: int = 50) -> list[TextChunk]:
    """Split `text` into chunks of at most about `max_tokens` estimated tokens.

    Consecutive chunks share up to `overlap_tokens` of whole trailing sentences.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if overlap_tokens < 0 or overlap_tokens >= max_tokens:
        raise ValueError("overlap_tokens must be in [0, max_tokens)")
    chat = is_chat(text)
    units = [piece for unit in _sentence_units(text, chat) for piece in _fit_unit(text, unit, max_tokens)]
    groups = _pack(text, units, max_tokens, overlap_tokens, chat)
    return [_as_chunk(text, ordinal, group) for ordinal, group in enumerate(groups)]


def _as_chunk(text: str, ordinal: int, group: Sequence[_Unit]) -> TextChunk:
    start, end = group[0].start, group[-1].end
    return TextChunk(ordinal=ordinal, text=text[start:end], start=start, end=end)


def _sentence_units(text: str, chat: bool) -> Iterator[_Unit]:
    """Locate each sentence of `split_sentences` in the source text; in a chat log, of each message (a line), and
    a message starts a paragraph."""
    cursor = 0
    sentences = [s for line in text.splitlines() for s in split_sentences(line)] if chat else split_sentences(text)
    for sentence in sentences:
        span = _locate(text, sentence.split(), cursor)
        if span is None:  # cannot happen while split_sentences only drops whitespace; keep the rest anyway
            span = _rest(text, cursor)
            if span is None:
                return
        start, end = span
        message = chat and (cursor == 0 or "\n" in text[cursor:start])
        yield _Unit(
            start=start,
            end=end,
            tokens=estimate_tokens(text[start:end]),
            starts_paragraph=cursor == 0 or message or bool(_BLANK_LINE.search(text, cursor, start)),
            is_heading=text.startswith("#", start),
            opens=message or not chat,
        )
        cursor = end


def _locate(text: str, words: Sequence[str], cursor: int) -> tuple[int, int] | None:
    """Where `words` (a sentence with its whitespace folded) occur in `text`, from `cursor` on."""
    position = cursor
    start = -1
    for word in words:
        found = text.find(word, position)
        if found < 0 or text[position:found].strip():
            return None
        start = found if start < 0 else start
        position = found + len(word)
    return (start, position) if start >= 0 else None


def _rest(text: str, cursor: int) -> tuple[int, int] | None:
    stripped = text[cursor:].strip()
    if not stripped:
        return None
    start = text.index(stripped[0], cursor)
    return start, start + len(stripped)


def _fit_unit(text: str, unit: _Unit, max_tokens: int) -> Iterator[_Unit]:
    """Yield `unit` itself, or consecutive hard-cut pieces of it that each fit `max_tokens`."""
    if unit.tokens <= max_tokens:
        yield unit
        return
    atoms = [(m.start(), m.end()) for m in _ATOM.finditer(text, unit.start, unit.end)]
    first = True
    for start, end in _cut_atoms(text, atoms, max_tokens):
        opens = unit.opens and first
        yield _Unit(start, end, estimate_tokens(text[start:end]), unit.starts_paragraph and first, False, False, opens)
        first = False


def _cut_atoms(text: str, atoms: Sequence[tuple[int, int]], max_tokens: int) -> Iterator[tuple[int, int]]:
    """Spans of consecutive atoms, each as long as the budget allows."""
    window = 4 * max_tokens + 4  # no piece within budget holds more atoms than this (bounds the search)
    i = 0
    while i < len(atoms):
        start = atoms[i][0]
        ends = [end for _, end in atoms[i : i + window]]
        count = _count_fitting(ends, _fits_from(text, start, max_tokens))
        if count == 0:  # one atom over budget on its own (a long hyphenated run): cut it by characters
            yield from _cut_chars(text, atoms[i][0], atoms[i][1], max_tokens)
            i += 1
            continue
        count = _prefer_clause_end(text, start, ends[:count])
        yield start, ends[count - 1]
        i += count


def _cut_chars(text: str, start: int, stop: int, max_tokens: int) -> Iterator[tuple[int, int]]:
    window = 8 * max_tokens + 8
    while start < stop:
        ends = list(range(start + 1, min(stop, start + window) + 1))
        count = _count_fitting(ends, _fits_from(text, start, max_tokens))
        end = ends[max(count, 1) - 1]
        yield start, end
        start = end


def _fits_from(text: str, start: int, max_tokens: int) -> Callable[[int], bool]:
    def fits(end: int) -> bool:
        return estimate_tokens(text[start:end]) <= max_tokens

    return fits


def _count_fitting(candidates: Sequence[int], fits: Callable[[int], bool]) -> int:
    """How many leading candidates satisfy `fits`, which is monotone (true, ..., true, false, ...)."""
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if fits(candidates[middle]):
            low = middle + 1
        else:
            high = middle
    return low


def _prefer_clause_end(text: str, start: int, ends: Sequence[int]) -> int:
    """How many atoms to take: up to the last clause mark in the second half of the piece, else all."""
    half = start + (ends[-1] - start) // 2
    for count in range(len(ends), 0, -1):
        end = ends[count - 1]
        if end <= half:
            break
        if text[end - 1] in _CLAUSE_END:
            return count
    return len(ends)


def _pack(text: str, units: Sequence[_Unit], max_tokens: int, overlap_tokens: int, chat: bool) -> list[list[_Unit]]:
    """Greedily group units into chunks, closing early at a paragraph that would not fit whole; in a chat log the
    overlap leaves room for the whole message that follows it."""
    paragraph_tokens = _paragraph_tokens(units)
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    fresh = 0  # units in `current` that are not overlap carried from the previous chunk
    for i, unit in enumerate(units):
        if fresh and _should_close(text, current, unit, paragraph_tokens[i], max_tokens):
            opening = _opening(current, fresh)
            if not unit.opens and opening:  # a chat message would be cut: it moves whole to the next chunk
                groups.append(current[:opening])
                current, fresh = current[opening:], len(current) - opening
            else:
                groups.append(current)
                # A new section (heading) starts clean; elsewhere the last sentences carry over.
                after = paragraph_tokens[i] - unit.tokens if chat and unit.starts_paragraph else 0  # the message's rest
                room = max_tokens - after
                current = [] if unit.is_heading else _overlap(text, current, unit, room, overlap_tokens)
                fresh = 0
        current.append(unit)
        fresh += 1
    if fresh:
        groups.append(current)
    return groups


def _opening(current: Sequence[_Unit], fresh: int) -> int:
    """Where in `current` the message its last unit belongs to opens, when that is after the chunk's first fresh
    unit (the chunk keeps something of its own); else 0."""
    for index in range(len(current) - 1, len(current) - fresh, -1):
        if current[index].opens:
            return index
    return 0


def _should_close(text: str, current: Sequence[_Unit], unit: _Unit, paragraph_size: int, max_tokens: int) -> bool:
    # Estimated on the real slice: per-sentence estimates do not add up exactly.
    if estimate_tokens(text[current[0].start : unit.end]) > max_tokens:
        return True
    # A chunk at least half full ends where a paragraph starts that it cannot hold whole.
    size = estimate_tokens(text[current[0].start : current[-1].end])
    return unit.starts_paragraph and size * 2 >= max_tokens and size + paragraph_size > max_tokens


def _paragraph_tokens(units: Sequence[_Unit]) -> list[int]:
    """For each unit that starts a paragraph, the paragraph's tokens; a heading counts with the next one."""
    starts = [i for i, unit in enumerate(units) if unit.starts_paragraph or i == 0]
    bounds = [*starts, len(units)]
    sizes = [sum(u.tokens for u in units[a:b]) for a, b in pairwise(bounds)]
    totals = [0] * len(units)
    for n, first in enumerate(starts):
        following = sizes[n + 1] if units[first].is_heading and n + 1 < len(sizes) else 0
        totals[first] = sizes[n] + following
    return totals


def _overlap(text: str, previous: Sequence[_Unit], following: _Unit, max_tokens: int, overlap: int) -> list[_Unit]:
    """Whole trailing sentences of the previous chunk, within the overlap and leaving room for the next, from
    the first that can open a chunk."""
    carried: list[_Unit] = []
    for unit in reversed(previous):
        if not unit.whole or estimate_tokens(text[unit.start : previous[-1].end]) > overlap:
            break
        if estimate_tokens(text[unit.start : following.end]) > max_tokens:
            break
        carried.insert(0, unit)
    while carried and not carried[0].opens:
        carried.pop(0)
    return carried
