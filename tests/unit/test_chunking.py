"""Token-aware, boundary-preferring chunking (backend.graphrag_agent.chunking)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from backend.graphrag_agent.chunking import TextChunk, chunk_text
from backend.graphrag_agent.text import estimate_tokens, split_sentences

ENGLISH = (
    "# Pressing day\n\n"
    "The apples are washed in a trough. Rotten fruit is picked out by hand! Then the scratter crushes "
    "them into pomace.\n\n"
    "The pomace is folded into cloths and stacked on racks. The press squeezes the stack for two hours. "
    "Each tonne of apples gives about 650 litres of juice.\n\n"
    "## Fermentation\n\n"
    "Wild yeast does the work. The cellar stays cool, so fermentation takes months. "
    "The cider rests on its lees until May, when the blends are decided."
)
CHINESE = (
    "苹果园建于一九二一年，创始人是一对夫妇。"
    "他们在山坡上种下了四百棵树！磨坊建于一九五八年。"
    "每年秋天，人们用老式压榨机榨汁；果汁在地窖里慢慢发酵。"
    "发酵需要三到五个月？酿好的苹果酒在五月装瓶。"
)


def covered(text: str, chunks: list[TextChunk]) -> bool:
    """Every non-whitespace character of `text` lies inside some chunk."""
    inside = [False] * len(text)
    for chunk in chunks:
        for i in range(chunk.start, chunk.end):
            inside[i] = True
    return all(inside[i] for i, ch in enumerate(text) if not ch.isspace())


def assert_well_formed(text: str, chunks: list[TextChunk], max_tokens: int) -> None:
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text.strip() == chunk.text != ""
        assert estimate_tokens(chunk.text) <= max_tokens
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    assert covered(text, chunks)


@pytest.mark.parametrize("text", ["", "   \n\n\t  "])
def test_blank_text_gives_no_chunks(text: str) -> None:
    assert chunk_text(text, 50, 10) == []


def test_short_text_is_one_exact_chunk() -> None:
    text = "  One short sentence. And another one.\n"
    chunks = chunk_text(text, 100, 10)
    assert chunks == [TextChunk(0, "One short sentence. And another one.", 2, 38)]


@pytest.mark.parametrize(("max_tokens", "overlap"), [(12, 0), (20, 5), (30, 10), (60, 20), (400, 50)])
def test_english_chunks_fit_cover_everything_and_keep_offsets(max_tokens: int, overlap: int) -> None:
    chunks = chunk_text(ENGLISH, max_tokens, overlap)
    assert_well_formed(ENGLISH, chunks, max_tokens)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each sentence starts and ends (the sample texts have no folded whitespace inside sentences)."""
    spans: list[tuple[int, int]] = []
    for sentence in split_sentences(text):
        start = text.index(sentence, spans[-1][1] if spans else 0)
        spans.append((start, start + len(sentence)))
    return spans


def test_chunks_start_and_end_on_sentence_boundaries() -> None:
    spans = sentence_spans(ENGLISH)
    chunks = chunk_text(ENGLISH, 30, 8)
    assert len(chunks) > 2
    for chunk in chunks:
        assert chunk.start in {start for start, _ in spans}
        assert chunk.end in {end for _, end in spans}


def test_overlap_is_whole_trailing_sentences_within_budget() -> None:
    chunks = chunk_text(ENGLISH, 30, 12)
    overlaps = 0
    for previous, following in pairwise(chunks):
        if following.start < previous.end:
            overlaps += 1
            shared = ENGLISH[following.start : previous.end]
            assert previous.text.endswith(shared)
            assert following.start in {start for start, _ in sentence_spans(ENGLISH)}
            assert estimate_tokens(shared) <= 12
    assert overlaps >= 1


def test_zero_overlap_gives_disjoint_chunks() -> None:
    chunks = chunk_text(ENGLISH, 25, 0)
    assert len(chunks) > 2
    for previous, following in pairwise(chunks):
        assert following.start >= previous.end


def test_a_new_section_starts_a_chunk_without_overlap() -> None:
    chunks = chunk_text(ENGLISH, 45, 15)
    section = ENGLISH.index("## Fermentation")
    starting_there = [c for c in chunks if c.start == section]
    assert starting_there, [c.text[:30] for c in chunks]


def test_paragraph_boundary_is_preferred_over_filling_up() -> None:
    first = " ".join(f"Alpha sentence number {i} is here." for i in range(6))
    second = " ".join(f"Beta sentence number {i} is here." for i in range(6))
    text = f"{first}\n\n{second}"
    budget = estimate_tokens(first) + estimate_tokens(second) // 2
    chunks = chunk_text(text, budget, 0)
    assert chunks[0].text == first
    assert chunks[1].text == second


def test_chinese_splits_on_cjk_punctuation() -> None:
    chunks = chunk_text(CHINESE, 30, 0)
    assert_well_formed(CHINESE, chunks, 30)
    assert len(chunks) > 1
    for chunk in chunks[:-1]:
        assert chunk.text[-1] in "。！？；"


def test_chinese_overlap_carries_whole_sentences() -> None:
    chunks = chunk_text(CHINESE, 40, 15)
    assert_well_formed(CHINESE, chunks, 40)
    assert any(b.start < a.end for a, b in pairwise(chunks))


def test_overlong_latin_sentence_is_cut_hard() -> None:
    text = "Intro. " + " ".join(f"word{i}" for i in range(400)) + " and the end. Outro."
    chunks = chunk_text(text, 50, 10)
    assert_well_formed(text, chunks, 50)
    assert len(chunks) >= 400 * 1.3 / 50


def test_overlong_cjk_sentence_prefers_clause_marks() -> None:
    clause = "果园里有很多苹果树，"
    text = clause * 30 + "结束。"
    chunks = chunk_text(text, 40, 5)
    assert_well_formed(text, chunks, 40)
    assert all(chunk.text.endswith("，") for chunk in chunks[:-1])


def test_single_atom_over_budget_is_cut_by_characters() -> None:
    text = "-".join(["ab"] * 300)  # one space-free run of 300 words
    chunks = chunk_text(text, 20, 0)
    assert_well_formed(text, chunks, 20)
    assert "".join(c.text for c in chunks) == text


def test_chunking_is_deterministic() -> None:
    assert chunk_text(ENGLISH + CHINESE, 25, 8) == chunk_text(ENGLISH + CHINESE, 25, 8)


def test_windows_line_endings_and_odd_whitespace_keep_offsets() -> None:
    text = "First line.\r\n\r\nSecond\u00a0paragraph has\ttabs. Third  sentence!\r\n"
    chunks = chunk_text(text, 6, 0)
    assert_well_formed(text, chunks, 6)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_impossible_sizes_are_rejected(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", max_tokens, overlap)


CHAT = "\n".join(
    [
        "Time: 20260221_15:00",
        *(
            f"{speaker}: Message {n} starts here. It goes on a little! 🎶 And it ends here, after three sentences."
            for n, speaker in enumerate(["LiHua", "WolfgangSchulz", "Dacey", "Henley"] * 4)
        ),
    ]
)


@pytest.mark.parametrize("max_tokens, overlap", [(60, 20), (90, 30), (45, 40)])
def test_a_chat_chunk_opens_with_a_message_and_its_speaker(max_tokens: int, overlap: int) -> None:
    chunks = chunk_text(CHAT, max_tokens, overlap)
    assert_well_formed(CHAT, chunks, max_tokens)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.start == 0 or CHAT[chunk.start - 1] == "\n", chunk.text[:40]
        assert chunk.text.endswith("three sentences.")  # a message is not cut where it fits a chunk


def test_a_message_longer_than_a_chunk_is_still_cut() -> None:
    long_line = "Speaker: " + " ".join(f"Sentence {n} of a very long message." for n in range(40))
    text = f"{long_line}\nOther: A short reply."
    chunks = chunk_text(text, 50, 10)
    assert_well_formed(text, chunks, 50)
    assert len(chunks) > 2
