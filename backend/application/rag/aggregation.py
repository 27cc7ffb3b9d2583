"""Merge the evidence of several agent runs: deduplicate by stable id, rank, fit a token budget."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from backend.domain.conversation import Citation
from backend.domain.retrieval import AgentRun, RetrievalResult
from backend.domain.tokens import estimate_tokens

SNIPPET_CHARS = 280


def deduplicate(runs: Iterable[AgentRun]) -> list[RetrievalResult]:
    """One result per `result_id`, keeping the best score and remembering every agent that found it."""
    best: dict[str, RetrievalResult] = {}
    found_by: dict[str, list[str]] = {}
    for run in runs:
        for result in run.results:
            found_by.setdefault(result.result_id, []).append(run.agent_type)
            kept = best.get(result.result_id)
            if kept is None or result.score > kept.score:
                best[result.result_id] = result
    merged = [
        replace(result, metadata={**result.metadata, "agents": sorted(set(found_by[result_id]))})
        for result_id, result in best.items()
    ]
    # Ties broken by id so the order (and so the citation numbers) is deterministic.
    merged.sort(key=lambda result: (-result.score, result.result_id))
    return merged


def fit_token_budget(results: Iterable[RetrievalResult], budget: int, max_items: int) -> list[RetrievalResult]:
    """Keep results in rank order while they fit; a result too large to fit is skipped, not cut."""
    kept: list[RetrievalResult] = []
    used = 0
    for result in results:
        if len(kept) >= max_items:
            break
        cost = estimate_tokens(result.evidence)
        if used + cost > budget and kept:
            continue
        kept.append(result)
        used += cost
    return kept


def aggregate(runs: Iterable[AgentRun], budget: int, max_items: int) -> list[RetrievalResult]:
    return fit_token_budget(deduplicate(runs), budget, max_items)


def to_citations(evidence: Iterable[RetrievalResult]) -> tuple[Citation, ...]:
    return tuple(
        Citation(
            id=result.result_id,
            title=result.source.title,
            doc_id=result.source.doc_id,
            chunk_id=result.source.chunk_id,
            snippet=_snippet(result.evidence),
        )
        for result in evidence
    )


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    cut = flat[:SNIPPET_CHARS].rsplit(" ", 1)[0]
    return cut + "…"
