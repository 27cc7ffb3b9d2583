"""Extractive community summaries, ranks, and building communities with reuse of unchanged ones."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence

import pytest

from backend.domain.graph import CommunityRecord, EntityGraph, EntityRecord, RelationRecord
from backend.graphrag_agent.communities import CommunityDraft
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.community_summaries import (
    MAX_SUMMARY_CHARS,
    CommunitySummary,
    central_entities,
    extractive_summary,
    internal_relations,
    structural_rank,
)

KB = "kb"


def draft(members: Sequence[str], weight: float = 10.0, level: int = 0) -> CommunityDraft:
    return CommunityDraft("c1", level, tuple(sorted(members)), None, (), weight, len(members))


def entity(entity_id: str, description: str = "", mentions: int = 1) -> EntityRecord:
    return EntityRecord(entity_id, entity_id.title(), "person", description, mentions)


def relation(source: str, target: str, weight: float, description: str = "") -> RelationRecord:
    return RelationRecord(source, target, description, weight)


STORY = {
    "scrooge": entity("scrooge", "Scrooge is a miser who runs a counting-house. He hates Christmas.", 9),
    "marley": entity("marley", "Marley was Scrooge's partner. He died seven years ago.", 4),
    "bob": entity("bob", "Bob is Scrooge's underpaid clerk.", 5),
    "tim": entity("tim", "Tim is Bob's youngest son.", 3),
    "fred": entity("fred", "Fred is Scrooge's cheerful nephew.", 2),
}
STORY_RELATIONS = [
    relation("scrooge", "marley", 9, "Marley's ghost warns Scrooge to change his ways. It drags chains."),
    relation("scrooge", "bob", 6, "Bob works for Scrooge in the cold office."),
    relation("bob", "tim", 8, "Bob carries Tim on his shoulder."),
    relation("scrooge", "fred", 2, "Fred invites Scrooge to Christmas dinner."),
    relation("tim", "outsider", 50, "A relation that leaves the community."),
]


def test_central_entities_rank_by_weighted_degree_inside_the_community() -> None:
    story = draft(list(STORY))
    inside = internal_relations(story, STORY_RELATIONS)

    ranked = [e.entity_id for e in central_entities(story, STORY, inside)]

    # scrooge 9+6+2, bob 6+8, tim 8 (the outside weight 50 does not count), marley 9, fred 2
    assert ranked == ["scrooge", "bob", "marley", "tim", "fred"]
    assert [r.weight for r in inside] == [9, 8, 6, 2]


def test_extractive_title_names_the_most_central_entities() -> None:
    title, _summary, _rank = extractive_summary(draft(list(STORY)), STORY, STORY_RELATIONS)

    assert title == "Scrooge, Bob, Marley"


def test_extractive_summary_uses_first_sentences_of_entities_and_strongest_relations() -> None:
    summary = extractive_summary(draft(list(STORY)), STORY, STORY_RELATIONS).summary

    assert summary.startswith("A community of 5 entities centred on Scrooge, Bob and Marley.")
    assert "Scrooge (person): Scrooge is a miser who runs a counting-house." in summary
    assert "He hates Christmas" not in summary  # only the first sentence of each description
    assert "Scrooge – Marley: Marley's ghost warns Scrooge to change his ways." in summary
    assert "leaves the community" not in summary
    assert summary.index("Scrooge –") < summary.index("Bob – Tim") < summary.index("Scrooge – Bob")


def test_extractive_summary_stays_within_its_bound() -> None:
    members = [f"e{i}" for i in range(40)]
    wordy = {m: entity(m, "word " * 400) for m in members}
    relations = [relation(a, b, 1.0, "link " * 300) for a, b in itertools.pairwise(members)]

    summary = extractive_summary(draft(members), wordy, relations).summary

    assert 0 < len(summary) <= MAX_SUMMARY_CHARS


def test_a_single_long_sentence_is_clipped_not_dropped() -> None:
    members = ["a", "b"]
    records = {"a": entity("a", "x" * 5000), "b": entity("b")}

    summary = extractive_summary(draft(members), records, [relation("a", "b", 1)]).summary

    assert summary.startswith("A community of 2 entities")
    assert "…" in summary and len(summary) <= MAX_SUMMARY_CHARS


def test_a_community_without_entity_records_still_gets_a_title() -> None:
    result = extractive_summary(draft(["x", "y", "z"]), {}, [])

    assert result == CommunitySummary("Community of 3 entities", "A community of 3 entities.", result.rank)


@pytest.mark.parametrize(
    ("size", "weight", "expected"),
    [(2, 1.0, 2.15), (50, 100.0, 10.0), (500, 10_000.0, 10.0), (2, 0.0, 1.4)],
)
def test_rank_follows_the_documented_formula(size: int, weight: float, expected: float) -> None:
    members = [f"e{i}" for i in range(size)]

    assert structural_rank(draft(members, weight)) == pytest.approx(expected, abs=0.01)


def test_rank_grows_with_size_and_internal_weight() -> None:
    small, bigger, heavier = draft(["a", "b", "c"], 3), draft(list("abcdefgh"), 3), draft(["a", "b", "c"], 30)

    assert 0 <= structural_rank(small) < structural_rank(bigger) <= 10
    assert structural_rank(small) < structural_rank(heavier) <= 10


# -- CommunityBuilder -----------------------------------------------------------------------------


class CountingSummarizer:
    """Records calls and how many run at once."""

    def __init__(self) -> None:
        self.calls: list[CommunityDraft] = []
        self.relations_seen: dict[str, list[RelationRecord]] = {}
        self.running = 0
        self.most_running = 0

    async def summarize(
        self, kb: str, draft: CommunityDraft, entities: Mapping[str, EntityRecord], relations: Sequence[RelationRecord]
    ) -> CommunitySummary:
        self.calls.append(draft)
        self.relations_seen[draft.community_id] = list(relations)
        assert set(entities) <= set(draft.entity_ids)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        await asyncio.sleep(0.001)
        self.running -= 1
        return CommunitySummary(f"T{len(self.calls)}", "S", 1.5)


def clique_relations(prefix: str, size: int) -> list[RelationRecord]:
    names = [f"{prefix}{i}" for i in range(size)]
    return [relation(a, b, 5.0, f"{a} knows {b}") for a, b in itertools.combinations(names, 2)]


def graph_of(relations: Sequence[RelationRecord]) -> EntityGraph:
    ids = sorted({n for r in relations for n in (r.source_id, r.target_id)})
    return EntityGraph(tuple(ids), tuple((r.source_id, r.target_id, r.weight) for r in relations))


def records_of(relations: Sequence[RelationRecord]) -> dict[str, EntityRecord]:
    return {n: entity(n) for r in relations for n in (r.source_id, r.target_id)}


async def test_build_summarizes_every_community_with_its_internal_relations() -> None:
    relations = [*clique_relations("a", 4), *clique_relations("b", 4), relation("a0", "b0", 0.1)]
    summarizer = CountingSummarizer()

    built = await CommunityBuilder(summarizer).build(KB, graph_of(relations), records_of(relations), relations, {})

    assert (built.summarized, built.reused, len(built.records)) == (2, 0, 2)
    for record in built.records:
        assert record.title.startswith("T") and record.summary == "S" and record.rank == 1.5
        seen = summarizer.relations_seen[record.community_id]
        assert len(seen) == 6 and all({r.source_id, r.target_id} <= set(record.entity_ids) for r in seen)


async def test_unchanged_communities_are_reused_without_a_summarizer_call() -> None:
    relations = [*clique_relations("a", 4), *clique_relations("b", 4), relation("a0", "b0", 0.1)]
    first = await CommunityBuilder(CountingSummarizer()).build(
        KB, graph_of(relations), records_of(relations), relations, {}
    )
    previous = {r.community_id: r for r in first.records}
    grown = [*relations, *clique_relations("c", 3), relation("c0", "b1", 0.1)]
    summarizer = CountingSummarizer()

    second = await CommunityBuilder(summarizer).build(KB, graph_of(grown), records_of(grown), grown, previous)

    assert (second.summarized, second.reused) == (1, 2)
    assert [d.entity_ids for d in summarizer.calls] == [("c0", "c1", "c2")]
    assert {r.community_id: r for r in second.records if r.community_id in previous} == previous


async def test_a_reused_community_gets_its_new_parent() -> None:
    relations = clique_relations("a", 4)
    fresh = await CommunityBuilder(CountingSummarizer()).build(
        KB, graph_of(relations), records_of(relations), relations, {}
    )
    (record,) = fresh.records
    previous = {record.community_id: CommunityRecord(record.community_id, 0, "Kept", "Kept.", 7.0, (), "gone")}

    again = await CommunityBuilder(CountingSummarizer()).build(
        KB, graph_of(relations), records_of(relations), relations, previous
    )

    assert again.records == [CommunityRecord(record.community_id, 0, "Kept", "Kept.", 7.0, record.entity_ids, None)]


async def test_summaries_run_concurrently_within_the_bound() -> None:
    relations = [r for k in range(12) for r in clique_relations(f"k{k:02d}_", 3)]
    summarizer = CountingSummarizer()

    built = await CommunityBuilder(summarizer, concurrency=3).build(
        KB, graph_of(relations), records_of(relations), relations, {}
    )

    assert built.summarized == 12
    assert summarizer.most_running == 3


async def test_records_come_for_every_level_with_parent_links() -> None:
    relations: list[RelationRecord] = []
    for g in range(10):
        cliques = [f"g{g}c{c}_" for c in range(3)]
        for prefix in cliques:
            relations += [
                relation(a, b, 10.0) for a, b in itertools.combinations([f"{prefix}{i}" for i in range(4)], 2)
            ]
        for x, y in itertools.combinations(cliques, 2):
            relations += [relation(f"{x}{i}", f"{y}{i}", 2.0) for i in range(4)]
        relations.append(relation(f"g{g}c0_0", f"g{(g + 1) % 10}c0_0", 0.5))

    built = await CommunityBuilder(CountingSummarizer(), max_cluster_size=6).build(
        KB, graph_of(relations), records_of(relations), relations, {}
    )

    ids = {r.community_id: r for r in built.records}
    assert sorted({r.level for r in built.records}) == [0, 1]
    assert all(ids[r.parent_id].level == 0 for r in built.records if r.parent_id)
    assert sum(1 for r in built.records if r.level == 1) == 30


async def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        CommunityBuilder(CountingSummarizer(), concurrency=0)
