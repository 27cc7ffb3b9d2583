"""Dated documents that continue one another: a plan and the next day's reminder, a report and its follow-up.

A question names an event in the words of one document of such a thread; the follow-ups of the next days
carry the subject on without those words ("the contract" becomes "the papers", "the launch" becomes
"Tuesday's event"), so no search of the question ranks them. Their nearness to the document the question did find
says they belong with it: a document dated within a few days of the best hit and close to it in meaning
gets a share of its score, the hit's score times their similarity (score regularisation by the cluster
hypothesis, as in Diaz 2005, limited to neighbours in time, where a close document is most likely the same
thread rather than another instance of the subject). Undated documents have no neighbours in time.
How many days and how close are the agent's to say (`NaiveRagSettings`, tuning.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from backend.graphrag_agent.agents.chunk_search import ChunkSearch, hit_date
from backend.graphrag_agent.dates import DateScope
from backend.graphrag_agent.ports import ChunkHit


@dataclass(frozen=True, slots=True)
class Continuation:
    """The best chunk of another document of the anchor's thread, and its similarity to the anchor chunk."""

    hit: ChunkHit
    similarity: float


async def continuations(
    search: ChunkSearch,
    anchor: ChunkHit,
    depth: int,
    scope: DateScope | None = None,
    *,
    days: int,
    min_similarity: float,
) -> list[Continuation]:
    """The best chunk of each other document dated within `days` of `anchor`'s (and in `scope`, the dates the
    question names, if any) at least `min_similarity` close to it, most similar first, among the `depth`
    chunks nearest the anchor; none when the anchor is undated or has no stored vector."""
    anchor_day = hit_date(anchor)
    if anchor_day is None:
        return []
    vector = (await search.chunk_embeddings([anchor.chunk_id])).get(anchor.chunk_id)
    if vector is None:
        return []
    found: dict[str, Continuation] = {}
    for hit in await search.vector(vector, depth):
        if hit.score < min_similarity:
            break  # the hits come most similar first
        if hit.doc_id != anchor.doc_id and hit.doc_id not in found and _continues(hit, anchor_day, days, scope):
            found[hit.doc_id] = Continuation(hit, hit.score)
    return list(found.values())


def _continues(hit: ChunkHit, anchor_day: date, days: int, scope: DateScope | None) -> bool:
    day = hit_date(hit)
    return day is not None and abs((day - anchor_day).days) <= days and (scope is None or scope.contains(day))
