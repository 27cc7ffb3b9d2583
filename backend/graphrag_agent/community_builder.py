"""Communities of a KB with titles and summaries, reusing the summaries of unchanged communities.

A community id is a hash of (kb, level, members), so a community whose members did not change since
the last build has the same id: its previous record is kept (only its parent link is refreshed) and
the summarizer is not called for it. Everything else is summarized, a bounded number at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence

from backend.domain.graph import BuiltCommunities, CommunityRecord, EntityGraph, EntityRecord, RelationRecord
from backend.graphrag_agent.communities import (
    DEFAULT_MAX_CLUSTER_SIZE,
    DEFAULT_SEED,
    CommunityDraft,
    detect_communities,
)
from backend.graphrag_agent.community_summaries import CommunitySummarizer

DEFAULT_CONCURRENCY = 4


class CommunityBuilder:
    """Implements the application's `CommunityDetector` port: hierarchical Leiden, then summaries."""

    def __init__(
        self,
        summarizer: CommunitySummarizer,
        *,
        max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE,
        seed: int = DEFAULT_SEED,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._summarizer = summarizer
        self._max_cluster_size = max_cluster_size
        self._seed = seed
        self._concurrency = concurrency

    async def build(
        self,
        kb: str,
        graph: EntityGraph,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
        previous: Mapping[str, CommunityRecord],
    ) -> BuiltCommunities:
        """Detect, then summarize what is new. `previous` maps community id → the KB's stored records."""
        # Seconds of CPU on a large graph: keep the event loop free meanwhile.
        drafts = await asyncio.to_thread(detect_communities, kb, graph, self._max_cluster_size, self._seed)
        records: dict[str, CommunityRecord] = {}
        fresh: list[CommunityDraft] = []
        for draft in drafts:
            old = previous.get(draft.community_id)
            if old is None:
                fresh.append(draft)
            else:
                records[draft.community_id] = dataclasses.replace(
                    old, level=draft.level, entity_ids=draft.entity_ids, parent_id=draft.parent_id
                )
        reused = len(records)
        grouped = _relations_by_community(fresh, relations)
        summarized = await _summarize_all(kb, fresh, entities, grouped, self._summarizer, self._concurrency)
        records.update((record.community_id, record) for record in summarized)
        ordered = [records[draft.community_id] for draft in drafts]
        return BuiltCommunities(records=ordered, summarized=len(summarized), reused=reused)


def _relations_by_community(
    drafts: Sequence[CommunityDraft], relations: Sequence[RelationRecord]
) -> dict[str, list[RelationRecord]]:
    """community id → its internal relations. An entity is in at most one community per level."""
    owner_by_level: dict[int, dict[str, str]] = defaultdict(dict)
    for draft in drafts:
        owner = owner_by_level[draft.level]
        for entity_id in draft.entity_ids:
            owner[entity_id] = draft.community_id
    grouped: dict[str, list[RelationRecord]] = defaultdict(list)
    for relation in relations:
        for owner in owner_by_level.values():
            community = owner.get(relation.source_id)
            if community is not None and community == owner.get(relation.target_id):
                grouped[community].append(relation)
    return grouped


async def _summarize_all(
    kb: str,
    drafts: Sequence[CommunityDraft],
    entities: Mapping[str, EntityRecord],
    relations: Mapping[str, list[RelationRecord]],
    summarizer: CommunitySummarizer,
    concurrency: int,
) -> list[CommunityRecord]:
    results: list[CommunityRecord | None] = [None] * len(drafts)
    pending: Iterator[int] = iter(range(len(drafts)))

    async def worker() -> None:
        # Workers share one iterator: each index is taken exactly once, no task per community.
        for index in pending:
            draft = drafts[index]
            members = {e: entities[e] for e in draft.entity_ids if e in entities}
            summary = await summarizer.summarize(kb, draft, members, relations.get(draft.community_id, []))
            results[index] = CommunityRecord(
                community_id=draft.community_id,
                level=draft.level,
                title=summary.title,
                summary=summary.summary,
                rank=summary.rank,
                entity_ids=draft.entity_ids,
                parent_id=draft.parent_id,
            )

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(drafts))):
            group.create_task(worker())
    return [record for record in results if record is not None]
