from backend.application.rag.aggregation import aggregate, deduplicate, fit_token_budget, to_citations
from backend.domain.retrieval import AgentRun, EvidenceSource, Granularity, RetrievalResult


def result(result_id: str, score: float, words: int = 10, title: str = "T") -> RetrievalResult:
    return RetrievalResult(
        result_id,
        Granularity.CHUNK,
        " ".join(["word"] * words),
        EvidenceSource(doc_id="d-" + result_id, title=title, chunk_id=result_id),
        score,
    )


def test_duplicates_keep_the_best_score_and_every_agent() -> None:
    runs = [
        AgentRun("naive_rag_agent", "kb:naive_rag_agent:retrieve_only", (result("a", 0.4), result("b", 0.9))),
        AgentRun("graph_agent", "kb:graph_agent:retrieve_only", (result("a", 0.7),)),
    ]
    merged = deduplicate(runs)
    assert [r.result_id for r in merged] == ["b", "a"]
    assert merged[1].score == 0.7
    assert merged[1].metadata["agents"] == ["graph_agent", "naive_rag_agent"]


def test_ties_are_ordered_by_id_so_citation_numbers_are_stable() -> None:
    runs = [AgentRun("x", "w", (result("z", 0.5), result("m", 0.5), result("a", 0.5)))]
    assert [r.result_id for r in deduplicate(runs)] == ["a", "m", "z"]


def test_token_budget_skips_what_does_not_fit_but_keeps_smaller_ones() -> None:
    ranked = [result("big1", 0.9, words=50), result("huge", 0.8, words=400), result("small", 0.7, words=20)]
    kept = fit_token_budget(ranked, budget=100, max_items=10)
    assert [r.result_id for r in kept] == ["big1", "small"]


def test_first_result_is_kept_even_over_budget_and_max_items_is_respected() -> None:
    assert [r.result_id for r in fit_token_budget([result("huge", 1, words=900)], budget=10, max_items=5)] == ["huge"]
    many = [result(str(i), 1 - i / 100) for i in range(20)]
    assert len(aggregate([AgentRun("x", "w", tuple(many))], budget=10_000, max_items=8)) == 8


def test_citations_carry_ids_titles_and_short_snippets() -> None:
    long_text = "alpha " * 200
    item = RetrievalResult("chunk:1", Granularity.CHUNK, long_text, EvidenceSource("doc", "Title", "c1"), 0.5)
    (citation,) = to_citations([item])
    assert (citation.id, citation.title, citation.doc_id, citation.chunk_id) == ("chunk:1", "Title", "doc", "c1")
    assert len(citation.snippet) <= 281
    assert citation.snippet.endswith("…")
