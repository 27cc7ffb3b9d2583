from backend.graphrag_agent.clauses import question_clauses
from backend.graphrag_agent.text import (
    cjk_share,
    content_terms,
    estimate_tokens,
    fulltext_query_terms,
    fulltext_terms,
    index_terms,
    overlap_score,
    split_sentences,
)


def test_index_terms_lowercase_words_and_cjk_unigrams_and_bigrams() -> None:
    assert index_terms("Wrenfield's Cider, 1921") == ["wrenfield", "cider", "1921"]
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


def test_fulltext_terms_segment_chinese_into_words_and_queries_drop_question_words() -> None:
    assert fulltext_terms("北京大学 Founded") == ["北京大学", "founded"]
    assert fulltext_query_terms("北京大学是什么时候成立的？") == ["北京大学", "成立"]
    assert fulltext_query_terms("When was the orchard founded?") == ["orchard", "founded"]


def test_an_unknown_name_is_not_joined_to_the_copula_after_it() -> None:
    # jieba's HMM reads an unknown name and 是 or 被 as one word: 潘淑是. Words its dictionary holds stay whole.
    assert fulltext_query_terms("潘淑是谁的皇后？") == ["潘淑", "皇后"]
    assert fulltext_terms("潘淑被立为皇后")[:2] == ["潘淑", "被"]
    assert "还是" in fulltext_terms("乙二醛是有机还是无机化合物")


def test_queries_drop_the_noun_that_asks_the_kind_of_answer() -> None:
    # The passage that answers "in what year" says 1921, not "year"; a passage about the calendar says "year".
    assert fulltext_query_terms("Who started the orchard, and in what year?") == ["started", "orchard"]
    assert fulltext_query_terms("Which cities does the Rhine cross?") == ["rhine", "cross"]
    assert fulltext_query_terms("What is the name of the dog?") == ["dog"]
    assert fulltext_query_terms("What type of pizza does Wolfgang prefer?") == ["pizza", "wolfgang", "prefer"]
    assert fulltext_query_terms("How many years did the war last?") == ["years", "war", "last"]


def test_latin_words_and_digits_do_not_swallow_the_chinese_after_them() -> None:
    assert fulltext_terms("1990年成立") == ["1990", "年", "成立"]
    assert index_terms("ABC公司") == ["abc", "公", "司", "公司"]


def test_cjk_share_counts_chinese_characters_among_word_characters() -> None:
    assert cjk_share("") == 0.0
    assert cjk_share("plain English") == 0.0
    assert cjk_share("北京大学") == 1.0
    assert 0.3 < cjk_share("北京大学 Peking") < 0.5


def test_overlap_finds_chinese_terms_as_substrings_whatever_their_segmentation() -> None:
    assert overlap_score(["北京大学", "成立"], "北京大学成立于1898年") == 1.0
    assert overlap_score(["orchard", "founded"], "The orchard was planted") == 0.5


def test_a_question_about_two_events_in_time_splits_into_its_clauses() -> None:
    question = "Did Jennifer announce the yoga schedule before Li Hua asked about the swimming pool hours?"
    assert question_clauses(question) == [
        "Did Jennifer announce the yoga schedule",
        "Li Hua asked about the swimming pool hours",
    ]
    assert question_clauses("When did the director of Wrong Turn die?") == []
    assert question_clauses("Did Lothair die before his brother?") == []  # one side says too little


def test_the_ends_of_a_span_are_two_clauses() -> None:
    question = "How many days passed between Adam ordering the new curtain and Li Hua hanging the curtain up?"
    assert question_clauses(question) == ["Adam ordering the new curtain", "Li Hua hanging the curtain up"]
    assert question_clauses("Did it take long from Li Hua buying the heater to the heater being installed?") == [
        "Li Hua buying the heater",
        "the heater being installed",
    ]
    assert question_clauses("How far is it from Paris to Lyon?") == []
    assert question_clauses("What is the difference between a fox and a wolf?") == []


def test_joined_names_are_also_indexed_by_their_parts() -> None:
    assert fulltext_terms("HaileyJohnson met LiHua") == [
        "haileyjohnson",
        "hailey",
        "johnson",
        "met",
        "lihua",
        "li",
        "hua",
    ]
    assert index_terms("GraphRAG HTMLParser NASA iPhone") == [
        "graphrag", "graph", "rag", "htmlparser", "html", "parser", "nasa", "iphone", "i", "phone",
    ]  # fmt: skip
    assert overlap_score(fulltext_query_terms("What did Hailey bake?"), "HaileyJohnson: I baked rye bread") > 0


def test_a_possessive_is_its_noun() -> None:
    assert fulltext_terms("Li Hua's bike, Hua’s car and McDonald's") == [
        "li",
        "hua",
        "bike",
        "hua",
        "car",
        "and",
        "mcdonald",
        "mc",
        "donald",
    ]
    assert fulltext_terms("don't") == ["don't"]
