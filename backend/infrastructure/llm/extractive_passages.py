"""Chunk text as the sentences an extractive answer may quote, each with the context it stands in.

Markdown is read, not quoted: a heading names the section its sentences belong to (context, never answer
text), list markers, emphasis, code marks and links are stripped, and a table row reads as its cells. A line
that starts with a label of up to three words and a colon ("Speaker: ...", "Time: ...") is a block of its own, as a chat
message or a record is, and its later sentences keep the label. A chunk that starts in the middle of a
sentence (chunks overlap) does not offer that fragment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.graphrag_agent.text import is_cjk, split_sentences

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|>\s?)")
_LABEL_WORD = r"[^\s:：.,;!?。，；、()（）\[\]《》「」]"  # a label is words, not a bracketed aside
_LABEL = re.compile(rf"^\s*((?:{_LABEL_WORD}+ ){{0,2}}{_LABEL_WORD}{{1,24}})\s*(?::\s+|：\s*)\S")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)]|>)\s+")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1|(?<![\w*])\*(?!\s)([^*\n]+?)(?<!\s)\*(?![\w*])|`([^`\n]*)`")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>\n]*>")
_WORD_START = re.compile(r"^[\"'“(\[]?([^\W\d_])")


@dataclass(frozen=True, slots=True)
class Sentence:
    """One quotable sentence of a chunk: its text without markdown, where it stands, and what frames it."""

    text: str
    source: int  # the 1-based number of its result in the evidence list (its citation marker)
    block: int  # the block (paragraph, list item, table row, labelled line) it belongs to, within its chunk
    position: int  # its order within the chunk
    heading: str  # the section heading above it in the chunk, "" when the chunk shows none
    label: str  # the label of its labelled line ("Speaker"), "" when none

    @property
    def said(self) -> str:
        """Its text without the label that opens its line ("Speaker: Hi there." is "Hi there.")."""
        return self.text.removeprefix(self.label).lstrip(" :：") if self.label else self.text


@dataclass(slots=True)
class _Block:
    lines: list[str]
    heading: str
    table: bool = False


def strip_markdown(text: str) -> str:
    """Inline markdown as plain text: emphasis and code marks, links (their text) and HTML tags removed."""
    text = _LINK.sub(r"\1", text)
    text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(3) or m.group(4) or "", text)
    return _HTML_TAG.sub("", text)


def _table_row(line: str) -> str:
    cells = [cell.strip() for cell in line.strip().strip("|").split("|") if cell.strip()]
    if len(cells) == 2:
        return f"{cells[0]}: {cells[1]}"
    return "; ".join(cells)


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    heading = ""
    current: _Block | None = None
    for line in text.splitlines():
        if not line.strip() or _TABLE_RULE.match(line):
            current = None
            continue
        if found := _HEADING.match(line):
            heading, current = strip_markdown(found.group(1)), None
            continue
        table = bool(_TABLE_ROW.match(line))
        if current is None or table or current.table or _BLOCK_START.match(line) or _LABEL.match(line):
            current = _Block([], heading, table)
            blocks.append(current)
        current.lines.append(_table_row(line) if table else line)
    return blocks


def _fragment(text: str) -> bool:
    """A chunk's first words in the middle of a sentence: a Latin word in lower case."""
    start = _WORD_START.match(text)
    return start is not None and start.group(1).islower() and not is_cjk(start.group(1))


def chunk_sentences(text: str, source: int) -> list[Sentence]:
    """The quotable sentences of one chunk, in order."""
    sentences: list[Sentence] = []
    for number, block in enumerate(_blocks(text)):
        joined = " ".join(" ".join(block.lines).split())
        label_match = _LABEL.match(strip_markdown(_LIST_MARKER.sub("", joined)))
        label = label_match.group(1).strip() if label_match and not block.table else ""
        for index, raw in enumerate(split_sentences(joined)):
            if not sentences and number == 0 and index == 0 and _fragment(raw):
                continue
            clean = " ".join(strip_markdown(_LIST_MARKER.sub("", raw)).split())
            if clean and any(char.isalnum() for char in clean):
                sentences.append(Sentence(clean, source, number, len(sentences), block.heading, label))
    return sentences
