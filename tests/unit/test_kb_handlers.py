"""A KB-specific handler replaces the generic RAG path for its KB only."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.application.answering.generator import AnswerGenerator
from backend.application.chat.stream_executor import ChatStreamExecutor
from backend.application.ports.generation import GenerationRequest
from backend.application.rag.kb_handlers import KnowledgeBaseHandlerFactory
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.domain.context import RequestContext
from backend.domain.errors import InvalidRequest
from backend.domain.events import SourcesEvent, TokenEvent
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.retrieval import RagRunSpec
from backend.domain.worker import Worker
from backend.infrastructure.agents.rag_factory.builders import AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry
from backend.infrastructure.llm.extractive import ExtractiveAnswerer
from tests.support.fakes import FakeAgent, evidence

REGISTRY = """
[[kb]]
kb_prefix = "shop"
default_agent = "naive_rag_agent"
handler = "tests.support.kb_handler_example:build"

[[kb]]
kb_prefix = "docs"
default_agent = "naive_rag_agent"
"""


def build(tmp_path: Path) -> tuple[ChatStreamExecutor, FakeAgent]:
    path = tmp_path / "kbs.toml"
    path.write_text(REGISTRY)
    file_registry = KnowledgeBaseRegistry.from_file(path)
    agent = FakeAgent(results=[evidence("c1", "generic evidence")])
    pool = RAGAgentManager({"naive_rag_agent": lambda kb, res: agent}, AgentResources(None, None))  # type: ignore[arg-type]
    handlers = KnowledgeBaseHandlerFactory.from_knowledge_bases(file_registry.list())
    generator = AnswerGenerator(None, ExtractiveAnswerer())
    rag = RagManager(pool, RetrievalLimits())
    return ChatStreamExecutor(rag, generator, handlers), agent


def request(kb: str) -> GenerationRequest:
    spec = RagRunSpec(Worker(KnowledgeBase(kb), "naive_rag_agent"))
    return GenerationRequest(RequestContext("r", "u", "s"), "how much is the mill tour?", kb, (spec,))


async def test_the_handler_answers_for_its_kb_and_no_agent_runs(tmp_path: Path) -> None:
    executor, agent = build(tmp_path)
    events = [event async for event in executor.stream(request("shop"))]
    assert isinstance(events[0], SourcesEvent) and events[0].sources[0].id == "table:prices"
    assert "".join(e.text for e in events if isinstance(e, TokenEvent)).strip() == "mill tour costs £12 [1]"
    assert agent.calls == []


async def test_other_kbs_keep_the_generic_path(tmp_path: Path) -> None:
    executor, agent = build(tmp_path)
    events = [event async for event in executor.stream(request("docs"))]
    sources = next(e for e in events if isinstance(e, SourcesEvent)).sources
    assert [c.id for c in sources] == ["c1"]
    assert len(agent.calls) == 1


@pytest.mark.parametrize("path", ["no_colon_here", "tests.support.missing_module:build", "tests.support.fakes:nope"])
def test_a_bad_handler_path_is_a_clear_configuration_error(path: str) -> None:
    with pytest.raises(InvalidRequest, match="handler"):
        KnowledgeBaseHandlerFactory.from_knowledge_bases([KnowledgeBase("x", handler=path)])
