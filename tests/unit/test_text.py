from backend.graphrag_agent.text import content_terms, estimate_tokens, index_terms, split_sentences


def test_index_terms_lowercase_words_and_cjk_unigrams_and_bigrams() -> None:
    assert index_terms("Wrenfield's Cider, 1921") == ["wrenfield's", "cider", "1921"]
    assert index_terms("果园成立") == ["果", "园", "成", "立", "果园", "园成", "成立"]


def test_content_terms_drop_stopwords_and_duplicates() -> None:
    assert content_terms("When was the orchard founded, and was the orchard big?") == ["orchard", "founded", "big"]


def test_estimate_tokens_counts_words_and_cjk_characters() -> None:
    assert estimate_tokens("") == 0
    assert 10 <= estimate_tokens("one two three four five six seven eight nine ten") <= 15
    assert estimate_tokens("果园成立于一九五二年") >= 10


def test_sentences_split_on_latin_and_cjk_punctuation() -> None:
    assert split_sentences("First one. Second one! 第三句。第四句？") == [
        "First one.",
        "Second one!",
        "第三句。",
        "第四句？",
    ]


def test_headings_and_list_items_are_sentences_of_their_own() -> None:
    text = (
        "## Prices\n- Orchard walks: free.\n- Mill tour: £12 per adult. Children go free.\n1. First step\nwraps here."
    )
    assert split_sentences(text) == [
        "## Prices",
        "- Orchard walks: free.",
        "- Mill tour: £12 per adult.",
        "Children go free.",
        "1. First step wraps here.",
    ]


def test_initials_and_titles_do_not_end_a_sentence_but_a_numeral_does() -> None:
    text = "It was directed by Robert A. Stemmle with Dr. Mayer. He was the son of Lothair I. He died in 869."
    assert split_sentences(text) == [
        "It was directed by Robert A. Stemmle with Dr. Mayer.",
        "He was the son of Lothair I.",
        "He died in 869.",
    ]
