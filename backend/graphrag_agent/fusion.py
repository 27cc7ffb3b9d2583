"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, 2009) of ranked id lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    class _Scored(DataclassInstance, Protocol):
        """A dataclass with a score (replaced, not mutated)."""

        @property
        def score(self) -> float: ...


S = TypeVar("S", bound="_Scored")


DEFAULT_K = 60


@dataclass(frozen=True, slots=True)
class FusedItem:
    """One id after fusion.

    `score` is the RRF score divided by its maximum (an item ranked first in every list), so it lies
    in [0, 1] and says how strongly the lists agree, comparable across queries. `ranks` holds the
    1-based rank of the item in each input list, None where the list does not contain it.
    """

    item_id: str
    score: float
    ranks: tuple[int | None, ...]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = DEFAULT_K, weights: Sequence[float] | None = None
) -> list[FusedItem]:
    """Fuse ranked lists of ids (best first) into one list, best first.

    Repeats of an id within one list count once, at their best rank. Ties keep the order in which
    the ids first appear (list by list), so the result is deterministic.
    """
    if k < 0:
        raise ValueError("k must be non-negative")
    list_weights = _weights(len(rankings), weights)
    ranks = _ranks_by_id(rankings)
    best_possible = sum(w / (k + 1) for w in list_weights)
    if best_possible <= 0:
        return []
    fused = [
        FusedItem(
            item_id=item_id, score=min(1.0, _score(item_ranks, list_weights, k) / best_possible), ranks=item_ranks
        )
        for item_id, item_ranks in ranks.items()
    ]
    order = {item_id: position for position, item_id in enumerate(ranks)}
    fused.sort(key=lambda item: (-item.score, order[item.item_id]))
    return fused


def _weights(count: int, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * count
    if len(weights) != count:
        raise ValueError(f"{len(weights)} weights for {count} rankings")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be non-negative")
    return [float(w) for w in weights]


def _ranks_by_id(rankings: Sequence[Sequence[str]]) -> dict[str, tuple[int | None, ...]]:
    """1-based rank of every id in every list (None when absent), ids in first-seen order."""
    found: dict[str, list[int | None]] = {}
    for list_index, ranking in enumerate(rankings):
        for position, item_id in enumerate(ranking, start=1):
            slots = found.setdefault(item_id, [None] * len(rankings))
            if slots[list_index] is None:
                slots[list_index] = position
    return {item_id: tuple(slots) for item_id, slots in found.items()}


def _score(ranks: tuple[int | None, ...], weights: Sequence[float], k: int) -> float:
    return sum(w / (k + rank) for rank, w in zip(ranks, weights, strict=True) if rank is not None)


def spread_over_groups(ranked: Sequence[S], group_of: Callable[[S], str]) -> list[S]:
    """`ranked` with each group's best item first, in rank order, then the groups' further items in rank order.

    For chunks grouped by document: a second chunk of a document already in the list adds less than the
    best chunk of another document, so the first places cover as many documents as the ranking offers.
    A moved item's score is capped by the score of the item before it, so scores still descend.
    """
    seen: set[str] = set()
    firsts: list[S] = []
    repeats: list[S] = []
    for item in ranked:
        group = group_of(item)
        (repeats if group in seen else firsts).append(item)
        seen.add(group)
    return _descending(firsts + repeats)


def _descending(items: Sequence[S]) -> list[S]:
    """Each item's score capped by the score of the item before it."""
    capped: list[S] = []
    for item in items:
        if capped and item.score > capped[-1].score:
            item = replace(item, score=capped[-1].score)
        capped.append(item)
    return capped


def interleave(rankings: Sequence[Sequence[S]], key: Callable[[S], str]) -> list[S]:
    """The rankings taken in turns (first places of each, then second places, ...), each item once.

    For rankings of different questions about one request (a question and its clauses): each gets its best
    items into the first places, which a fused score would give to whichever matched most.
    Scores are capped as in `spread_over_groups`, so they descend.
    """
    taken: set[str] = set()
    merged: list[S] = []
    for place in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if place < len(ranking) and key(ranking[place]) not in taken:
                taken.add(key(ranking[place]))
                merged.append(ranking[place])
    return _descending(merged)


def ahead(first: Sequence[S], then: Sequence[S], key: Callable[[S], str]) -> list[S]:
    """`first`, then the items of `then` it lacks; scores capped as in `spread_over_groups`, so they descend.

    For a ranking that must lead whenever it found anything (a question's search restricted to the dates
    it names), with the ordinary ranking as the fallback behind it.
    """
    taken = {key(item) for item in first}
    return _descending([*first, *(item for item in then if key(item) not in taken)])


def merge_by_score(ranked: Sequence[S], added: Sequence[S], key: Callable[[S], str]) -> list[S]:
    """`ranked` and `added` as one list by descending score, each key once, where it scores best.

    For items scored apart from a ranking (passed on from a ranked item) that take their place in it by score.
    Ties keep `ranked`'s items first, and each list's own order.
    """
    merged: list[S] = []
    taken: set[str] = set()
    for item in sorted([*ranked, *added], key=lambda item: -item.score):  # stable
        if key(item) not in taken:
            taken.add(key(item))
            merged.append(item)
    return merged
