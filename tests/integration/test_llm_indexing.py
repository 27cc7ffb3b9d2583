"""Indexing with a model: extraction and community reports through the real client, replaying
recorded real-model outputs from the scripted OpenAI-compatible server."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.application.knowledge.communities import CommunityMaintainer
from backend.application.knowledge.indexing import GraphIndexer
from backend.application.knowledge.locks import KbLocks
from backend.application.ports.ingestion import SourceDocument
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.extraction.prompts import SYSTEM_PROMPT as EXTRACTION_PROMPT
from backend.infrastructure.extraction.cache import ExtractionCache
from backend.infrastructure.extraction.community_reports import LlmCommunitySummarizer
from backend.infrastructure.extraction.llm_extractor import LlmExtractor
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from backend.infrastructure.knowledge.chunker import TokenChunker
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from tests.support.hash_embedder import HashEmbedder
from tests.support.replay import recorded_extractions, recorded_reports, replay_file
from tests.support.scripted_llm import Reply, ScriptedLLM

KB = KnowledgeBase("carol")
CHUNKS = 12


def carol_excerpt() -> str:
    text = replay_file("mock_data.txt").read_text(encoding="utf-8-sig")
    start = text.index("STAVE ONE")
    return text[start : start + 14_000]


@pytest.fixture
async def model(scripted_llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleChatModel]:
    extractions = itertools.cycle(recorded_extractions())
    reports = itertools.cycle(recorded_reports())

    def respond(body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        answer = next(extractions) if system == EXTRACTION_PROMPT else next(reports)
        return Reply(tokens=[answer], content=answer)

    scripted_llm.responder = respond
    client = OpenAICompatibleChatModel(scripted_llm.base_url, "replay-key", "gpt-4o", max_retries=0)
    yield client
    await client.aclose()


async def test_model_extraction_and_reports_build_the_graph_once(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    store = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    cache = await ExtractionCache.open(tmp_path / "llm_cache.db")
    try:
        embedder = HashEmbedder()
        communities = CommunityMaintainer(store, embedder, CommunityBuilder(LlmCommunitySummarizer(model)))
        indexer = GraphIndexer(
            store, embedder, TokenChunker(300, 0), LlmExtractor(model, cache), communities, KbLocks()
        )
        document = SourceDocument("A Christmas Carol", carol_excerpt(), source="carol.txt")
        report = await indexer.index(KB, [document])
        counts = await store.counts(KB.kb_prefix)
        assert report.chunks_written >= CHUNKS // 2
        assert report.model_calls == report.chunks_written  # exactly one extraction call per chunk
        assert counts.entities > 20 and counts.relations > 10
        names = {
            e.name for e in await store.get_entities(KB.kb_prefix, (await store.entity_graph(KB.kb_prefix)).entity_ids)
        }
        assert "Scrooge" in {name.title() for name in names} or "SCROOGE" in names
        built = await store.list_communities(KB.kb_prefix)
        assert built and all(c.title and c.summary for c in built)
        report_calls = len(scripted_llm.requests) - report.model_calls
        assert report_calls == len(built)  # one report per community, none reused yet

        before = len(scripted_llm.requests)
        again = await indexer.index(KB, [document])
        assert (again.documents_unchanged, again.model_calls) == (1, 0)
        await communities.refresh(KB.kb_prefix)
        assert len(scripted_llm.requests) == before  # unchanged communities keep their reports
    finally:
        await cache.close()
        await store.close()


async def test_a_model_that_answers_in_another_format_never_leaves_the_kb_without_entities(
    scripted_llm: ScriptedLLM, tmp_path: Path, caplog: Any
) -> None:
    reports = itertools.cycle(recorded_reports())

    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == EXTRACTION_PROMPT:
            return Reply(content="Here are the people: Scrooge, Marley and Bob Cratchit.")
        answer = next(reports)
        return Reply(tokens=[answer], content=answer)

    scripted_llm.responder = respond
    store = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    cache = await ExtractionCache.open(tmp_path / "llm_cache.db")
    model = OpenAICompatibleChatModel(scripted_llm.base_url, "replay-key", "gpt-4o", max_retries=0)
    try:
        embedder = HashEmbedder()
        communities = CommunityMaintainer(store, embedder, CommunityBuilder(LlmCommunitySummarizer(model)))
        indexer = GraphIndexer(
            store, embedder, TokenChunker(300, 0), LlmExtractor(model, cache), communities, KbLocks()
        )
        with caplog.at_level("WARNING"):
            report = await indexer.index(KB, [SourceDocument("A Christmas Carol", carol_excerpt(), source="c.txt")])
        assert report.extraction_fallbacks == report.chunks_written > 0
        assert (await store.counts(KB.kb_prefix)).entities > 20  # the offline extractor's
        (record,) = await store.list_documents(KB.kb_prefix)
        assert record.metadata["extraction_fallbacks"] == report.chunks_written
        assert f"extraction of {report.chunks_written} chunks did not parse" in caplog.text
    finally:
        await model.aclose()
        await cache.close()
        await store.close()
