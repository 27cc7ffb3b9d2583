"""Routing terms (`graphrag_agent/routing_terms.py`): one function for what a KB's profile counts and what the
router looks up."""

from __future__ import annotations

import pytest

from backend.graphrag_agent.routing_terms import MAX_TERM_CHARS, routing_terms, word_terms


def test_words_are_folded_and_stemmed_so_forms_of_one_word_meet() -> None:
    assert routing_terms("Beekeeping") == routing_terms("beekeeper") == routing_terms("BEEKEEPERS")
    assert routing_terms("Café") == routing_terms("cafe") == {"cafe"}
    assert routing_terms("The hives of Hamish's farm") == {"hive", "hamish", "farm"}  # stopwords go


def test_a_camel_case_handle_counts_whole_and_in_parts() -> None:
    assert routing_terms("LiHua said hi") >= {"lihua", "li", "hua"}


def test_cjk_text_counts_as_characters_and_pairs() -> None:
    assert routing_terms("广三铁路") == {"广", "三", "铁", "路", "广三", "三铁", "铁路"}


def test_numerals_and_overlong_strings_are_not_terms() -> None:
    assert routing_terms(f"1903 {'x' * (MAX_TERM_CHARS + 1)} rail") == {"rail"}


@pytest.mark.parametrize("word", ["beekeeping", "Tobias", "café", "铁路", "广三铁路", "松"])
def test_a_messages_word_is_looked_up_by_terms_its_text_would_count(word: str) -> None:
    assert word_terms(word) and set(word_terms(word)) <= routing_terms(word)


def test_a_cjk_word_is_looked_up_by_its_pairs_and_a_stopword_by_nothing() -> None:
    assert word_terms("广三铁路") == ("广三", "三铁", "铁路")
    assert word_terms("the") == word_terms("1903") == ()
