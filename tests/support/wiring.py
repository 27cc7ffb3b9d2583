"""Use cases wired to fakes and in-memory adapters, for tests that exercise the real flow without I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.application.answering.generator import AnswerGenerator
from backend.application.chat.answer_saver import AnswerSaver
from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.chat_handler import ChatHandler
from backend.application.chat.pipeline import EventPipeline
from backend.application.chat.stream_executor import ChatStreamExecutor
from backend.application.chat.stream_handler import StreamHandler
from backend.application.chat.turns import TurnLimits, TurnService
from backend.application.ports.chat_model import ChatModel
from backend.application.ports.router import FollowUps
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.knowledge_base import KnowledgeBase
from backend.infrastructure.agents.rag_factory.builders import AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.llm.extractive import ExtractiveAnswerer
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.model_followups import ModelFollowUps
from backend.infrastructure.routing.profiles import CachedKbProfiles
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.fakes import FakeAgent
from tests.support.memory_graph import MemoryGraph

DEFAULT_KBS = (
    KnowledgeBase(
        "orchard", "An apple orchard and cider mill", ("orchard", "cider", "apple"), default_agent="naive_rag_agent"
    ),
)


@dataclass
class Wired:
    store: InMemoryConversationStore
    chat: ChatHandler
    stream: StreamHandler
    saver: AnswerSaver  # every turn's answer write; the service drains it at shutdown
    agent: FakeAgent


def wire(
    agent: FakeAgent,
    model: ChatModel | None = None,
    store: InMemoryConversationStore | None = None,
    kbs: Sequence[KnowledgeBase] = DEFAULT_KBS,
    agent_timeout_s: float = 2.0,
    pipeline: EventPipeline | None = None,
    budgets: BudgetPolicy | None = None,
    router_model: ChatModel | None = None,
) -> Wired:
    """`model` generates the answers; `router_model`, when given, also classifies and rewrites follow-ups (as the
    service does with one model: pass the same one)."""
    catalog = static_catalog(kbs)
    store = store or InMemoryConversationStore()
    pool = RAGAgentManager({agent.agent_type: lambda kb, res: agent}, AgentResources(None, None))  # type: ignore[arg-type]
    generator = AnswerGenerator(model, ExtractiveAnswerer())
    rag = RagManager(pool, RetrievalLimits(agent_timeout_s=agent_timeout_s))
    graph = MemoryGraph()
    content = ContentRouter(graph, WordfreqRarity())  # no KB holds anything: keywords decide
    policy = RoutingPolicy(RoutingSettings(), pool.available_agent_types)
    followups: FollowUps = OfflineFollowUps(WordfreqRarity())
    classifier = None
    if router_model is not None:
        followups = ModelFollowUps(router_model, OfflineFollowUps(WordfreqRarity()), timeout_s=2.0)
        classifier = LlmIntentClassifier(router_model, CachedKbProfiles(graph))
    router = RouterGraph(catalog, policy, content, followups, classifier, llm_timeout_s=2.0)
    turns = TurnService(store, catalog, pool.available_agent_types, TurnLimits(max_message_chars=2000))
    saver = AnswerSaver(turns)
    stream = StreamHandler(turns, router, ChatStreamExecutor(rag, generator), pipeline, budgets, saver)
    return Wired(store=store, chat=ChatHandler(stream), stream=stream, saver=saver, agent=agent)
