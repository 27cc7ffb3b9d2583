"""The `CommunityDetector` of indexing: hierarchical Leiden over the entity graph, then titles and summaries
for the communities whose members changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from backend.domain.graph import BuiltCommunities, CommunityRecord, EntityGraph, EntityRecord, RelationRecord
from backend.graphrag_agent.communities import DEFAULT_MAX_CLUSTER_SIZE
from backend.graphrag_agent.community_builder import build_communities
from backend.graphrag_agent.community_summaries import CommunitySummarizer


class LeidenCommunities:
    def __init__(self, summarizer: CommunitySummarizer, max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE) -> None:
        self._summarizer = summarizer
        self._max_cluster_size = max_cluster_size

    async def build(
        self,
        kb: str,
        graph: EntityGraph,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
        previous: Mapping[str, CommunityRecord],
    ) -> BuiltCommunities:
        return await build_communities(
            kb, graph, entities, relations, self._summarizer, previous, max_cluster_size=self._max_cluster_size
        )
