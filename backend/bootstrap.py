"""The composition root: the one place that turns settings into adapters and hands them to use cases.

Everything that holds a connection (the asyncpg pool, SQLite files, the Neo4j driver, HTTP clients)
is opened here, inside the FastAPI lifespan or a CLI command, and closed in reverse order when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from backend.application.answering.generator import AnswerGenerator
from backend.application.chat.answer_saver import AnswerSaver
from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.chat_handler import ChatHandler
from backend.application.chat.debug_middleware import DebugMiddleware
from backend.application.chat.history import HistoryService
from backend.application.chat.pipeline import EventPipeline
from backend.application.chat.stream_executor import ChatStreamExecutor
from backend.application.chat.stream_handler import StreamHandler
from backend.application.chat.turns import TurnLimits, TurnService
from backend.application.feedback import FeedbackService
from backend.application.knowledge.communities import CommunityMaintainer, CommunityRefresher, DeferredRefresher
from backend.application.knowledge.indexing import GraphIndexer
from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.knowledge.locks import KbLocks
from backend.application.knowledge.retrieval_service import RetrievalService
from backend.application.ports.chat_model import ChatModel
from backend.application.ports.conversation_store import ConversationStore
from backend.application.ports.graph_store import GraphStore
from backend.application.ports.ingestion import Extractor
from backend.application.rag.kb_handlers import KnowledgeBaseHandlerFactory
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.application.services import ServiceContainer
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.community_summaries import CommunitySummarizer
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.agents.rag_factory.builders import AGENT_BUILDERS, AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.config.settings import (
    EmbeddingProvider,
    ExtractorKind,
    GraphStoreKind,
    Settings,
    StoreKind,
)
from backend.infrastructure.embeddings.minilm import MiniLMEmbedder
from backend.infrastructure.embeddings.openai_compatible import OpenAICompatibleEmbedder
from backend.infrastructure.extraction.cache import ExtractionCache
from backend.infrastructure.extraction.community_reports import (
    ExtractiveCommunitySummarizer,
    LlmCommunitySummarizer,
)
from backend.infrastructure.extraction.llm_extractor import LlmExtractor
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from backend.infrastructure.graph_store.neo4j import Neo4jGraphStore
from backend.infrastructure.health import NamedProbe
from backend.infrastructure.knowledge.chunker import TokenChunker
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.knowledge_bases.catalog import KnowledgeBaseCatalog
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry
from backend.infrastructure.llm.accounted_model import AccountedChatModel
from backend.infrastructure.llm.extractive import ExtractiveAnswerer
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.native_threads import single_threaded_blas
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from backend.infrastructure.persistence.postgres.conversation_store import PostgresConversationStore
from backend.infrastructure.persistence.sqlite.conversation_store import SqliteConversationStore
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.router_graph import RouterGraph

logger = logging.getLogger(__name__)

GRAPH_DB = "graph.db"
HISTORY_DB = "chat_history.db"
LLM_CACHE_DB = "llm_cache.db"


async def _open_conversation_store(settings: Settings, stack: AsyncExitStack) -> ConversationStore:
    kind = settings.conversation_store
    dsn = settings.resolved_postgres_dsn()
    if kind is StoreKind.POSTGRES or (kind is StoreKind.AUTO and dsn):
        if not dsn:
            raise ValueError("CONVERSATION_STORE=postgres needs POSTGRES_DSN or POSTGRES_HOST")
        postgres = await PostgresConversationStore.open(
            dsn, min_size=settings.postgres_pool_min, max_size=settings.postgres_pool_max
        )
        stack.push_async_callback(postgres.close)
        logger.info("conversation history: Postgres")
        return postgres
    if kind is StoreKind.MEMORY:
        logger.warning("conversation history: in memory (lost on restart)")
        return InMemoryConversationStore()
    sqlite = await SqliteConversationStore.open(settings.data_dir / HISTORY_DB)
    stack.push_async_callback(sqlite.close)
    logger.info("conversation history: SQLite file %s", settings.data_dir / HISTORY_DB)
    return sqlite


def _build_embedder(settings: Settings) -> TextEmbedder:
    if settings.embedding_provider is EmbeddingProvider.OPENAI:
        if not settings.embedding_base_url:
            raise ValueError("EMBEDDING_PROVIDER=openai needs EMBEDDING_BASE_URL")
        return OpenAICompatibleEmbedder(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key.get_secret_value(),
            model=settings.embedding_model,
            dimension=settings.embedding_dimension,
            batch_size=settings.embedding_batch_size,
            multilingual=settings.embedding_multilingual is not False,
        )
    return MiniLMEmbedder.load(
        settings.embedding_model_dir,
        engine=settings.embedding_engine,
        multilingual=settings.embedding_multilingual is True,
        precision=settings.embedding_precision,
    )


def _build_chat_model(settings: Settings, stack: AsyncExitStack) -> ChatModel | None:
    if not (settings.llm_base_url and settings.llm_model):
        return None
    model = OpenAICompatibleChatModel(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value(),
        model=settings.llm_model,
        temperature=settings.llm_temperature,
        timeout_s=settings.llm_timeout_s,
        stream_idle_timeout_s=settings.llm_stream_idle_timeout_s,
        max_retries=settings.llm_max_retries,
        max_tokens=settings.llm_max_tokens,
    )
    stack.push_async_callback(model.aclose)
    # Every call of a request counts against its budget and lands in its debug log, secrets masked.
    return AccountedChatModel(model, secrets=[settings.llm_api_key.get_secret_value()])


async def _open_graph_store(
    settings: Settings, embedder: TextEmbedder, stack: AsyncExitStack, serving: bool
) -> GraphStore:
    """The knowledge graph. A server starts while Neo4j is down (it creates the schema when Neo4j answers, and
    /ready says so); the CLI, which has nothing to do without the graph, fails at once."""
    store: GraphStore
    kind = settings.graph_store
    if kind is GraphStoreKind.NEO4J or (kind is GraphStoreKind.AUTO and settings.neo4j_uri):
        if not settings.neo4j_uri:
            raise ValueError("GRAPH_STORE=neo4j needs NEO4J_URI")
        store = await Neo4jGraphStore.open(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            embedding_dimension=embedder.dimension,
            lazy=serving,
        )
        logger.info("knowledge graph: Neo4j")
    else:
        store = await EmbeddedGraphStore.open(settings.data_dir / GRAPH_DB)
        logger.info("knowledge graph: embedded SQLite file %s", settings.data_dir / GRAPH_DB)
    stack.push_async_callback(store.close)
    return store


def _uses_model_for_indexing(settings: Settings, model: ChatModel | None) -> bool:
    if settings.extractor is ExtractorKind.LLM and model is None:
        raise ValueError("EXTRACTOR=llm needs a chat model (LLM_BASE_URL and LLM_MODEL)")
    return settings.extractor is ExtractorKind.LLM or (settings.extractor is ExtractorKind.AUTO and model is not None)


async def _build_extractor(settings: Settings, model: ChatModel | None, stack: AsyncExitStack) -> Extractor:
    if model is None or not _uses_model_for_indexing(settings, model):
        return OfflineExtractor()
    cache = await ExtractionCache.open(settings.data_dir / LLM_CACHE_DB)
    stack.push_async_callback(cache.close)
    return LlmExtractor(model, cache, max_concurrency=settings.extraction_concurrency)


def _build_summarizer(settings: Settings, model: ChatModel | None) -> CommunitySummarizer:
    if model is not None and _uses_model_for_indexing(settings, model):
        return LlmCommunitySummarizer(model)
    return ExtractiveCommunitySummarizer()


@dataclass(frozen=True, slots=True)
class _Knowledge:
    store: GraphStore
    embedder: TextEmbedder
    catalog: KnowledgeBaseCatalog
    registry: KnowledgeBaseRegistry
    service: KnowledgeService


async def _open_knowledge(
    settings: Settings, model: ChatModel | None, stack: AsyncExitStack, serving: bool
) -> _Knowledge:
    """The knowledge graph and everything that writes it, shared by the server (`serving`: communities are
    refreshed in the background) and the CLI (refreshed at the end of each batch)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stack.enter_context(single_threaded_blas())  # vector searches run side by side: see native_threads.py
    embedder = _build_embedder(settings)
    store = await _open_graph_store(settings, embedder, stack, serving)
    registry = KnowledgeBaseRegistry.from_file(settings.kb_registry_path)
    catalog = KnowledgeBaseCatalog(registry, store)
    locks = KbLocks()
    detector = CommunityBuilder(
        _build_summarizer(settings, model), max_cluster_size=settings.community_max_cluster_size
    )
    maintainer = CommunityMaintainer(store, embedder, detector)
    refresher: CommunityRefresher = maintainer
    if serving:
        deferred = DeferredRefresher(maintainer, locks, settings.community_refresh_delay_s)
        stack.push_async_callback(deferred.drain)
        refresher = deferred
    indexer = GraphIndexer(
        store,
        embedder,
        TokenChunker(settings.chunk_tokens, settings.chunk_overlap_tokens),
        await _build_extractor(settings, model, stack),
        refresher,
        locks,
    )
    service = KnowledgeService(catalog, FileDocumentLoader(), indexer)
    return _Knowledge(store, embedder, catalog, registry, service)


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[ServiceContainer]:
    async with AsyncExitStack() as stack:
        store = await _open_conversation_store(settings, stack)
        model = _build_chat_model(settings, stack)
        knowledge = await _open_knowledge(settings, model, stack, serving=True)
        catalog = knowledge.catalog

        generator = AnswerGenerator(model, ExtractiveAnswerer(), settings.history_token_budget)
        resources = AgentResources(knowledge.store, knowledge.embedder, settings.rag_top_k, model)
        pool = RAGAgentManager(AGENT_BUILDERS, resources, settings.agent_pool_max)
        limits = RetrievalLimits(settings.rag_agent_timeout_s, settings.rag_context_token_budget, settings.rag_top_k)
        handlers = KnowledgeBaseHandlerFactory.from_knowledge_bases(knowledge.registry.list())
        rag = RagManager(pool, limits)
        routing = RoutingSettings(
            auto_route=settings.kb_auto_route,
            allow_override=settings.kb_auto_route_override,
            min_confidence=settings.kb_auto_route_min_confidence,
        )
        policy = RoutingPolicy(routing, pool.available_agent_types)
        classifier = LlmIntentClassifier(model) if model is not None else None
        router = RouterGraph(catalog, policy, classifier, settings.router_llm_timeout_s)
        turns = TurnService(
            store,
            catalog,
            pool.available_agent_types,
            TurnLimits(settings.max_message_chars, settings.history_max_messages),
        )
        budgets = BudgetPolicy(settings.request_max_model_calls, settings.request_timeout_s)
        saver = AnswerSaver(turns)  # every turn's answer; drained before the stores close (LIFO)
        stack.push_async_callback(saver.drain)
        stream = StreamHandler(
            turns,
            router,
            ChatStreamExecutor(rag, generator, handlers),
            EventPipeline([DebugMiddleware()]),
            budgets,
            saver,
        )

        yield ServiceContainer(
            chat=ChatHandler(stream),
            stream=stream,
            history=HistoryService(store),
            feedback=FeedbackService(store),
            knowledge=knowledge.service,
            retrieval=RetrievalService(catalog, rag),
            agent_types=pool.available_agent_types,
            probes=(
                NamedProbe("conversation_store", store.ping),
                NamedProbe("knowledge_store", knowledge.store.ping),
            ),
            generation_mode=generator.mode.value,
        )


@asynccontextmanager
async def open_knowledge_service(settings: Settings) -> AsyncIterator[KnowledgeService]:
    """Only what ingestion needs (the CLI): communities are refreshed at the end of each batch."""
    async with AsyncExitStack() as stack:
        model = _build_chat_model(settings, stack)
        knowledge = await _open_knowledge(settings, model, stack, serving=False)
        yield knowledge.service
