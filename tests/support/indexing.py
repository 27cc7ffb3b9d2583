"""The real ingestion pipeline, assembled for tests (offline extractor, extractive summaries)."""

from __future__ import annotations

from backend.graphrag_agent.extraction.base import Extractor
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.extraction.community_reports import ExtractiveCommunitySummarizer
from backend.infrastructure.graph_store.port import GraphStore
from backend.infrastructure.knowledge.communities import CommunityMaintainer
from backend.infrastructure.knowledge.graph_indexer import ChunkingOptions, GraphIndexer
from backend.infrastructure.knowledge.locks import KbLocks


def make_indexer(
    store: GraphStore,
    embedder: TextEmbedder,
    extractor: Extractor | None = None,
    chunking: ChunkingOptions | None = None,
    batch_size: int = 64,
) -> GraphIndexer:
    communities = CommunityMaintainer(store, embedder, ExtractiveCommunitySummarizer())
    return GraphIndexer(
        store, embedder, extractor or OfflineExtractor(), communities, KbLocks(), chunking, batch_size=batch_size
    )
