"""Reciprocal rank fusion (backend.graphrag_agent.fusion)."""

from __future__ import annotations

import random

import pytest

from backend.graphrag_agent.fusion import (
    FusedItem,
    ahead,
    interleave,
    merge_by_score,
    reciprocal_rank_fusion,
    spread_over_groups,
)


def test_single_list_keeps_its_order_and_the_top_scores_one() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"]])
    assert [f.item_id for f in fused] == ["a", "b", "c"]
    assert fused[0].score == pytest.approx(1.0)
    assert fused[1].score == pytest.approx(61 / 62)
    assert fused[2].score == pytest.approx(61 / 63)


def test_two_lists_fuse_with_known_scores() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a", "d"]], k=60)
    assert [f.item_id for f in fused] == ["a", "b", "c", "d"]  # a and b tie: first seen wins
    best = 2 / 61
    assert fused[0].score == pytest.approx((1 / 61 + 1 / 62) / best)
    assert fused[1].score == pytest.approx(fused[0].score)
    assert (fused[2].item_id, fused[2].ranks) == ("c", (3, None))
    assert fused[2].score == pytest.approx((1 / 63) / best)
    assert fused[3].ranks == (None, 3)


def test_agreement_beats_a_single_first_place() -> None:
    fused = reciprocal_rank_fusion([["x", "both"], ["y", "both"], ["z", "both"]])
    assert fused[0].item_id == "both"
    assert fused[0].ranks == (2, 2, 2)


def test_item_first_everywhere_scores_exactly_one() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["a", "c"], ["a"]])
    assert fused[0] == FusedItem("a", 1.0, (1, 1, 1))


def test_repeats_within_a_list_count_once_at_their_best_rank() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "a", "a"]])
    assert [f.item_id for f in fused] == ["a", "b"]
    assert fused[0].ranks == (1,)


def test_k_changes_how_much_rank_matters() -> None:
    sharp = reciprocal_rank_fusion([["a", "b"]], k=0)
    flat = reciprocal_rank_fusion([["a", "b"]], k=1000)
    assert sharp[1].score == pytest.approx(0.5)
    assert flat[1].score > 0.99


def test_weights_scale_each_list() -> None:
    fused = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 3.0])
    assert [f.item_id for f in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(0.75)
    assert fused[1].score == pytest.approx(0.25)


def test_zero_weight_list_is_ignored_for_scoring() -> None:
    fused = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 0.0])
    assert fused[0] == FusedItem("a", 1.0, (1, None))
    assert fused[1].score == 0.0


@pytest.mark.parametrize("rankings", [[], [[]], [[], []]])
def test_nothing_in_gives_nothing_out(rankings: list[list[str]]) -> None:
    assert reciprocal_rank_fusion(rankings) == []


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=-1)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[-1.0])


def test_scores_stay_in_unit_interval_and_sorted() -> None:
    rng = random.Random(7)
    ids = [f"id{i}" for i in range(40)]
    for _ in range(50):
        rankings = [rng.sample(ids, rng.randint(0, 25)) for _ in range(rng.randint(1, 4))]
        fused = reciprocal_rank_fusion(rankings, k=rng.randint(0, 100))
        scores = [f.score for f in fused]
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)
        assert len(fused) == len({i for r in rankings for i in r})


# --- spreading over documents and interleaving rankings ----------------------------------------------


def _item(item_id: str, score: float) -> FusedItem:
    return FusedItem(item_id, score, (1,))


def test_spread_puts_each_documents_best_item_first_and_keeps_scores_descending() -> None:
    ranked = [_item("a1", 1.0), _item("a2", 0.9), _item("b1", 0.5), _item("a3", 0.4), _item("c1", 0.3)]
    spread = spread_over_groups(ranked, lambda item: item.item_id[0])
    assert [item.item_id for item in spread] == ["a1", "b1", "c1", "a2", "a3"]
    assert [item.score for item in spread] == [1.0, 0.5, 0.3, 0.3, 0.3]


def test_interleave_gives_every_ranking_its_first_places_once() -> None:
    whole = [_item("x", 1.0), _item("y", 0.8), _item("z", 0.6)]
    clause = [_item("y", 1.0), _item("w", 0.9)]
    merged = interleave([whole, clause], key=lambda item: item.item_id)
    assert [item.item_id for item in merged] == ["x", "y", "w", "z"]
    scores = [item.score for item in merged]
    assert scores == sorted(scores, reverse=True)
    assert interleave([], key=lambda item: item.item_id) == []


def test_ahead_puts_one_ranking_first_and_keeps_the_others_items_it_lacks() -> None:
    scoped = [_item("may-2", 0.4), _item("may-1", 0.3)]
    plain = [_item("april", 1.0), _item("may-1", 0.9), _item("june", 0.5)]
    merged = ahead(scoped, plain, key=lambda item: item.item_id)
    assert [item.item_id for item in merged] == ["may-2", "may-1", "april", "june"]
    assert [item.score for item in merged] == [0.4, 0.3, 0.3, 0.3]  # capped: the scores still descend
    assert [item.item_id for item in ahead([], plain, key=lambda item: item.item_id)] == ["april", "may-1", "june"]


def test_merge_by_score_places_added_items_by_score_each_once_at_its_best() -> None:
    ranked = [_item("a", 1.0), _item("b", 0.8), _item("c", 0.5)]
    added = [_item("d", 0.8), _item("c", 0.9), _item("b", 0.2)]
    merged = merge_by_score(ranked, added, key=lambda item: item.item_id)
    assert [(item.item_id, item.score) for item in merged] == [("a", 1.0), ("c", 0.9), ("b", 0.8), ("d", 0.8)]
    assert merge_by_score(ranked, [], key=lambda item: item.item_id) == ranked
    assert merge_by_score([], added[:1], key=lambda item: item.item_id) == added[:1]
