from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.infrastructure.llm.extractive import (
    EXTRACTIVE_NOTICE,
    NO_EVIDENCE_ANSWER,
    compose_extractive_answer,
    stream_pieces,
)


def evidence(text: str, title: str) -> RetrievalResult:
    return RetrievalResult("id-" + title, Granularity.CHUNK, text, EvidenceSource("d", title, "c"), 0.5)


def test_picks_the_sentence_that_answers_and_cites_its_source() -> None:
    items = [
        evidence("The mill has a red roof. Visitors park behind the barn.", "Visiting"),
        evidence("The orchard was founded in 1952 by Ada Fenwick. It has forty acres.", "History"),
    ]
    answer = compose_extractive_answer("When was the orchard founded?", items)
    assert answer.startswith(EXTRACTIVE_NOTICE)
    assert "founded in 1952 by Ada Fenwick. [2]" in answer
    assert "red roof" not in answer


def test_rare_question_terms_outweigh_common_ones() -> None:
    items = [evidence("The orchard sells apples. The orchard sells cider. The orchard opens at nine in summer.", "A")]
    answer = compose_extractive_answer("What time does the orchard open in summer?", items)
    assert "opens at nine in summer" in answer.split("\n\n", 1)[1].split(" [1]")[0]


def test_no_evidence_says_so() -> None:
    assert compose_extractive_answer("anything?", []) == NO_EVIDENCE_ANSWER


def test_chinese_question_matches_chinese_evidence() -> None:
    items = [evidence("果园成立于一九五二年。果园有四十英亩。", "历史")]
    assert "成立于一九五二年" in compose_extractive_answer("果园什么时候成立？", items)


def test_stream_pieces_rejoin_exactly() -> None:
    text = "Extractive answer:\n\nThe orchard  was founded [1]."
    pieces = stream_pieces(text)
    assert "".join(pieces) == text
    assert len(pieces) > 4
