"""The real ingestion pipeline, assembled for tests (offline extractor, extractive summaries)."""

from __future__ import annotations

from backend.application.knowledge.communities import CommunityMaintainer
from backend.application.knowledge.indexing import GraphIndexer
from backend.application.knowledge.locks import KbLocks
from backend.application.ports.graph_store import GraphStore
from backend.application.ports.ingestion import Extractor
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.extraction.community_reports import ExtractiveCommunitySummarizer
from backend.infrastructure.knowledge.chunker import TokenChunker


def make_indexer(
    store: GraphStore,
    embedder: TextEmbedder,
    extractor: Extractor | None = None,
    chunker: TokenChunker | None = None,
    batch_size: int = 64,
) -> GraphIndexer:
    communities = CommunityMaintainer(store, embedder, CommunityBuilder(ExtractiveCommunitySummarizer()))
    return GraphIndexer(
        store,
        embedder,
        chunker or TokenChunker(),
        extractor or OfflineExtractor(),
        communities,
        KbLocks(),
        batch_size=batch_size,
    )
