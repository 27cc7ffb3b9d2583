"""Hierarchical Leiden communities: structure, determinism, hierarchy and stable ids."""

from __future__ import annotations

import itertools
import random

import pytest

from backend.domain.graph import EntityGraph
from backend.domain.ids import community_id
from backend.graphrag_agent.communities import CommunityDraft, detect_communities

KB = "kb"


def clique(prefix: str, size: int, weight: float = 5.0) -> list[tuple[str, str, float]]:
    names = [f"{prefix}{i}" for i in range(size)]
    return [(a, b, weight) for a, b in itertools.combinations(names, 2)]


def entity_graph(edges: list[tuple[str, str, float]], extra: tuple[str, ...] = ()) -> EntityGraph:
    ids = sorted({n for a, b, _ in edges for n in (a, b)} | set(extra))
    return EntityGraph(tuple(ids), tuple(edges))


def two_clusters() -> EntityGraph:
    return entity_graph([*clique("a", 5), *clique("b", 5), ("a0", "b0", 0.1)])


def member_sets(drafts: list[CommunityDraft], level: int) -> set[frozenset[str]]:
    return {frozenset(d.entity_ids) for d in drafts if d.level == level}


def test_two_clusters_joined_by_a_weak_edge_are_two_communities() -> None:
    drafts = detect_communities(KB, two_clusters(), max_cluster_size=10)

    assert member_sets(drafts, 0) == {
        frozenset(f"a{i}" for i in range(5)),
        frozenset(f"b{i}" for i in range(5)),
    }
    assert all(d.level == 0 and d.parent_id is None and d.child_ids == () for d in drafts)


def test_structural_facts_count_only_internal_relations() -> None:
    drafts = detect_communities(KB, two_clusters())

    for draft in drafts:
        assert draft.size == 5
        assert draft.internal_edges == 10  # the clique; the weak bridge is outside both
        assert draft.internal_weight == pytest.approx(50.0)


def test_ids_are_stable_ids_of_the_members() -> None:
    drafts = detect_communities(KB, two_clusters())

    for draft in drafts:
        assert list(draft.entity_ids) == sorted(draft.entity_ids)
        assert draft.community_id == community_id(KB, draft.level, draft.entity_ids)


def test_same_members_give_the_same_id_even_when_the_rest_of_the_graph_changes() -> None:
    before = detect_communities(KB, two_clusters())
    grown = entity_graph([*two_clusters().edges, *clique("c", 4)])

    after = detect_communities(KB, grown)

    assert {d.community_id for d in before} < {d.community_id for d in after}


def test_another_kb_gives_other_ids() -> None:
    assert {d.community_id for d in detect_communities("one", two_clusters())}.isdisjoint(
        d.community_id for d in detect_communities("two", two_clusters())
    )


def random_graph(seed: int, nodes: int = 300, edges: int = 900) -> EntityGraph:
    rng = random.Random(seed)
    pairs: dict[tuple[str, str], float] = {}
    while len(pairs) < edges:
        a, b = sorted(rng.sample(range(nodes), 2))
        # Mostly inside groups of 20, so there is structure to find.
        if rng.random() < 0.8:
            b = a - a % 20 + rng.randrange(20)
            if a == b:
                continue
        key = (f"e{min(a, b):04d}", f"e{max(a, b):04d}")
        pairs[key] = rng.uniform(1, 10)
    return entity_graph([(a, b, w) for (a, b), w in pairs.items()])


def test_a_fixed_seed_gives_the_same_hierarchy_whatever_the_input_order() -> None:
    graph = random_graph(7)
    shuffled = list(graph.edges)
    random.Random(1).shuffle(shuffled)
    reversed_edges = [(b, a, w) for a, b, w in shuffled]

    first = detect_communities(KB, graph, max_cluster_size=8, seed=3)
    again = detect_communities(KB, graph, max_cluster_size=8, seed=3)
    reordered = detect_communities(KB, EntityGraph(graph.entity_ids[::-1], tuple(reversed_edges)), 8, 3)

    assert first == again == reordered
    assert len(first) > 10


def grouped_cliques(groups: int) -> EntityGraph:
    """Groups of three 4-cliques, cliques in a group linked, groups in a weak ring.

    On the whole graph, modularity merges each group (its cliques are far more linked than chance);
    inside one group, the three cliques are the better partition.
    """
    edges: list[tuple[str, str, float]] = []
    for g in range(groups):
        cliques = [f"g{g}c{c}_" for c in range(3)]
        for prefix in cliques:
            edges += clique(prefix, 4, weight=10.0)
        for x, y in itertools.combinations(cliques, 2):
            edges += [(f"{x}{i}", f"{y}{i}", 2.0) for i in range(4)]
        edges.append((f"g{g}c0_0", f"g{(g + 1) % groups}c0_0", 0.5))
    return entity_graph(edges)


def test_oversized_communities_are_split_into_a_linked_next_level() -> None:
    drafts = detect_communities(KB, grouped_cliques(10), max_cluster_size=6)
    by_id = {d.community_id: d for d in drafts}

    top = [d for d in drafts if d.level == 0]
    assert member_sets(drafts, 0) == {frozenset(f"g{g}c{c}_{i}" for c in range(3) for i in range(4)) for g in range(10)}
    assert member_sets(drafts, 1) == {frozenset(f"g{g}c{c}_{i}" for i in range(4)) for g in range(10) for c in range(3)}
    for child in (d for d in drafts if d.level == 1):
        parent = by_id[child.parent_id or ""]
        assert parent.level == 0
        assert set(child.entity_ids) <= set(parent.entity_ids)
        assert child.community_id in parent.child_ids
    assert all(len(d.child_ids) == 3 and d.parent_id is None for d in top)
    assert [d.level for d in drafts] == sorted(d.level for d in drafts)


def test_communities_within_the_size_limit_are_not_split() -> None:
    drafts = detect_communities(KB, grouped_cliques(10), max_cluster_size=12)

    assert {(d.level, d.size) for d in drafts} == {(0, 12)}


def test_every_level_stays_within_the_size_limit_when_leiden_can_split() -> None:
    drafts = detect_communities(KB, random_graph(11, nodes=400, edges=1600), max_cluster_size=10)

    leaves = [d for d in drafts if not d.child_ids]
    assert leaves and all(d.size <= 10 for d in leaves)
    # Children partition part of their parent: no entity twice on one level.
    for level in {d.level for d in drafts}:
        members = [e for d in drafts if d.level == level for e in d.entity_ids]
        assert len(members) == len(set(members))


def test_a_community_leiden_cannot_split_stays_a_leaf() -> None:
    drafts = detect_communities(KB, entity_graph(clique("k", 8)), max_cluster_size=3)

    assert [(d.level, d.size, d.child_ids) for d in drafts] == [(0, 8, ())]


def test_isolated_entities_and_singletons_form_no_community() -> None:
    graph = entity_graph([*clique("a", 4), ("p", "q", 1.0), ("s", "s", 3.0)], extra=("lonely", "alone"))

    drafts = detect_communities(KB, graph)

    assert member_sets(drafts, 0) == {frozenset({"a0", "a1", "a2", "a3"}), frozenset({"p", "q"})}
    assert all(d.size >= 2 for d in drafts)


def test_no_relations_means_no_communities() -> None:
    assert detect_communities(KB, EntityGraph(("a", "b"), ())) == []


def test_duplicate_and_unusable_weights_are_merged_and_kept() -> None:
    graph = EntityGraph(("a", "b"), (("a", "b", 2.0), ("b", "a", 3.0), ("a", "b", float("nan")), ("a", "b", -1.0)))

    (draft,) = detect_communities(KB, graph)

    assert draft.internal_edges == 1
    assert draft.internal_weight == pytest.approx(2.0 + 3.0 + 1.0 + 1.0)


def test_max_cluster_size_must_allow_a_pair() -> None:
    with pytest.raises(ValueError, match="max_cluster_size"):
        detect_communities(KB, two_clusters(), max_cluster_size=1)
