"""An answer's citation markers: renumbered 1..k in order of first use, cited apart from consulted sources."""

from __future__ import annotations

import pytest

from backend.domain.citations import CitationMarkers
from backend.domain.conversation import Citation

SOURCES = tuple(Citation(f"r{n}", f"Source {n}", f"d{n}", f"d{n}#0", f"text {n}") for n in range(1, 9))


def _ids(citations: tuple[Citation, ...]) -> list[str]:
    return [citation.id for citation in citations]


def test_markers_count_from_one_in_order_of_first_use() -> None:
    markers = CitationMarkers(SOURCES)
    text = markers.renumber("Founded in 1850 [3]. Cider since 1901 [5]. Still family run [3].")
    assert text == "Founded in 1850 [1]. Cider since 1901 [2]. Still family run [1]."
    assert _ids(markers.cited) == ["r3", "r5"]
    assert _ids(markers.consulted) == ["r1", "r2", "r4", "r6", "r7", "r8"]


def test_an_answer_without_markers_cites_nothing_and_consulted_everything() -> None:
    markers = CitationMarkers(SOURCES)
    assert markers.renumber("The orchard is in Somerset.") == "The orchard is in Somerset."
    assert markers.cited == ()
    assert markers.consulted == SOURCES


@pytest.mark.parametrize(
    ("written", "renumbered"),
    [
        ("a [4][2].", "a [1][2]."),
        ("a [4, 2].", "a [1][2]."),
        ("a [4,2,4].", "a [1][2]."),
        ("a [4; 2].", "a [1][2]."),
        ("甲 [4，2]。", "甲 [1][2]。"),
    ],
)
def test_lists_of_sources_become_one_marker_each(written: str, renumbered: str) -> None:
    assert CitationMarkers(SOURCES).renumber(written) == renumbered


@pytest.mark.parametrize("text", ["in [1990] it opened", "see [9]", "see [0]", "[2, 12]", "[note]", "a [ ] b"])
def test_brackets_that_name_no_source_are_text(text: str) -> None:
    markers = CitationMarkers(SOURCES)
    assert markers.renumber(text) == text
    assert markers.cited == ()


def test_a_marker_split_across_deltas_is_sent_whole_with_its_last_part() -> None:
    markers = CitationMarkers(SOURCES)
    sent = [markers.feed(delta) for delta in ["Founded", " in 1850 [", "6", "]", " and", " [", "2", ", ", "6", "]."]]
    assert sent == ["Founded", " in 1850 ", "", "[1]", " and", " ", "", "", "", "[2][1]."]
    assert _ids(markers.cited) == ["r6", "r2"]


def test_what_only_looked_like_a_marker_is_sent_on_as_text() -> None:
    markers = CitationMarkers(SOURCES)
    assert [markers.feed(delta) for delta in ["a [", "b] c", " [3"]] == ["a ", "[b] c", " "]
    assert markers.flush() == "[3"  # the answer ended inside a bracket: it is text
    assert markers.cited == ()


def test_a_long_bracket_is_not_held_back() -> None:
    markers = CitationMarkers(SOURCES)
    long_open = "[" + "1, " * 12
    assert markers.feed(long_open) == long_open


def test_deltas_without_a_bracket_pass_as_they_are() -> None:
    markers = CitationMarkers(SOURCES)
    delta = "no markers here"
    assert markers.feed(delta) is delta
