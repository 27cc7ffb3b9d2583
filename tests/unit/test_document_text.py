"""A stored document's text, joined back from its chunks: each overlap once, every chunk at its offsets."""

from __future__ import annotations

from itertools import pairwise

import pytest

from backend.domain import ids
from backend.domain.graph import ChunkRecord, DocumentRecord, StoredDocument, joined_text
from backend.graphrag_agent.chunking import chunk_text

TEXT = ids.normalise_text(
    "# Pressing\n\n"
    + " ".join(f"Apples of row {n} are washed, milled and pressed on day {n}." for n in range(40))
    + "\n\n# Fermenting\n\n"
    + "\n".join(f"Barrel {n} ferments for {n + 2} weeks in the cool cellar." for n in range(30))
)


def chunks_of(text: str, tokens: int, overlap: int) -> list[ChunkRecord]:
    pieces = chunk_text(text, tokens, overlap)
    return [ChunkRecord(f"c{c.ordinal}", "d", c.ordinal, c.text, c.start, c.end) for c in pieces]


@pytest.mark.parametrize(("tokens", "overlap"), [(60, 20), (200, 40), (30, 0)])
def test_the_chunks_join_into_the_text_they_were_cut_from(tokens: int, overlap: int) -> None:
    chunks = chunks_of(TEXT, tokens, overlap)
    assert len(chunks) > 2 and (overlap == 0 or any(a.end > b.start for a, b in pairwise(chunks)))

    text = joined_text(chunks)

    assert all(text[c.start : c.end] == c.text for c in chunks)  # the offsets hold in the joined text
    assert text.split() == TEXT.split()  # each overlap once; only whitespace between chunks may differ
    assert len(text) == len(TEXT)


def test_whitespace_between_chunks_comes_back_as_a_space_or_line_breaks() -> None:
    chunks = [ChunkRecord("a", "d", 0, "One.", 0, 4), ChunkRecord("b", "d", 1, "Two.", 5, 9)]
    assert joined_text(chunks) == "One. Two."
    paragraph = [ChunkRecord("a", "d", 0, "One.", 0, 4), ChunkRecord("b", "d", 1, "Two.", 6, 10)]
    assert joined_text(paragraph) == "One.\n\nTwo."
    overlapping = [ChunkRecord("a", "d", 0, "One. Two.", 0, 9), ChunkRecord("b", "d", 1, "Two. Three.", 5, 16)]
    assert joined_text(overlapping) == "One. Two. Three."


def test_chunks_without_offsets_are_joined_by_blank_lines() -> None:
    chunks = [ChunkRecord("a", "d", 0, "One."), ChunkRecord("b", "d", 1, "Two.")]
    assert joined_text(chunks) == "One.\n\nTwo."
    assert joined_text([]) == ""


def test_a_stored_document_reads_as_its_chunks_joined() -> None:
    chunks = tuple(chunks_of(TEXT, 60, 20))
    document = StoredDocument(DocumentRecord("d", "Cider", chunk_count=len(chunks)), chunks)
    assert document.text == joined_text(chunks)
