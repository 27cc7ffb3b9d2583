"""The composition root: the one place that turns settings into adapters and hands them to use cases.

Everything that holds a connection (the asyncpg pool, SQLite files, HTTP clients) is opened here,
inside the FastAPI lifespan or a CLI command, and closed in reverse order when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from backend.application.chat.chat_handler import ChatHandler
from backend.application.chat.history import HistoryService
from backend.application.chat.stream_handler import StreamHandler
from backend.application.chat.turns import TurnLimits, TurnService
from backend.application.feedback import FeedbackService
from backend.application.ingestion.ingest_service import IngestionService
from backend.application.ports.conversation_store import ConversationStore
from backend.application.services import ServiceContainer
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.agents.rag_factory.builders import AGENT_BUILDERS, AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.config.settings import EmbeddingProvider, Settings, StoreKind
from backend.infrastructure.embeddings.minilm import MiniLMEmbedder
from backend.infrastructure.embeddings.openai_compatible import OpenAICompatibleEmbedder
from backend.infrastructure.health import NamedProbe
from backend.infrastructure.knowledge.embedded_store import EmbeddedKnowledgeStore
from backend.infrastructure.knowledge.indexer import EmbeddedKnowledgeIndexer
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry
from backend.infrastructure.llm.answering import AnswerGenerator, GeneralChat
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.llm.types import ChatModel
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from backend.infrastructure.persistence.postgres.conversation_store import PostgresConversationStore
from backend.infrastructure.persistence.sqlite.conversation_store import SqliteConversationStore
from backend.infrastructure.rag.kb_handlers import KnowledgeBaseHandlerFactory
from backend.infrastructure.rag.rag_manager import RagManager, RetrievalLimits
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.router_graph import RouterGraph, RoutingPolicy
from backend.infrastructure.streaming.chat_stream_executor import ChatStreamExecutor

logger = logging.getLogger(__name__)

KNOWLEDGE_DB = "knowledge.db"
HISTORY_DB = "chat_history.db"


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
        )
    return MiniLMEmbedder.load(settings.embedding_model_dir)


def _build_chat_model(settings: Settings) -> ChatModel | None:
    if not (settings.llm_base_url and settings.llm_model):
        return None
    return OpenAICompatibleChatModel(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value(),
        model=settings.llm_model,
        temperature=settings.llm_temperature,
        timeout_s=settings.llm_timeout_s,
        stream_idle_timeout_s=settings.llm_stream_idle_timeout_s,
        max_retries=settings.llm_max_retries,
        max_tokens=settings.llm_max_tokens,
    )


async def _open_knowledge(settings: Settings, stack: AsyncExitStack) -> EmbeddedKnowledgeStore:
    knowledge = await EmbeddedKnowledgeStore.open(settings.data_dir / KNOWLEDGE_DB)
    stack.push_async_callback(knowledge.close)
    return knowledge


def _ingestion(
    settings: Settings, catalog: KnowledgeBaseRegistry, knowledge: EmbeddedKnowledgeStore, embedder: TextEmbedder
) -> IngestionService:
    indexer = EmbeddedKnowledgeIndexer(
        knowledge, embedder, chunk_tokens=settings.chunk_tokens, overlap_tokens=settings.chunk_overlap_tokens
    )
    return IngestionService(catalog, FileDocumentLoader(), indexer)


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[ServiceContainer]:
    async with AsyncExitStack() as stack:
        catalog = KnowledgeBaseRegistry.from_file(settings.kb_registry_path)
        store = await _open_conversation_store(settings, stack)
        knowledge = await _open_knowledge(settings, stack)
        embedder = _build_embedder(settings)
        model = _build_chat_model(settings)
        if model is not None:
            stack.push_async_callback(model.aclose)

        generator = AnswerGenerator(model, settings.history_token_budget)
        pool = RAGAgentManager(
            catalog, AGENT_BUILDERS, AgentResources(knowledge, embedder, settings.rag_top_k), settings.agent_pool_max
        )
        limits = RetrievalLimits(settings.rag_agent_timeout_s, settings.rag_context_token_budget, settings.rag_top_k)
        handlers = KnowledgeBaseHandlerFactory.from_knowledge_bases(catalog.list())
        rag = RagManager(pool, generator, limits, handlers)
        policy = RoutingPolicy(
            auto_route=settings.kb_auto_route,
            allow_override=settings.kb_auto_route_override,
            min_confidence=settings.kb_auto_route_min_confidence,
            llm_timeout_s=settings.router_llm_timeout_s,
        )
        classifier = LlmIntentClassifier(model, catalog.list()) if model is not None else None
        router = RouterGraph(catalog, policy, classifier)
        turns = TurnService(
            store,
            catalog,
            pool.available_agent_types,
            TurnLimits(settings.max_message_chars, settings.history_max_messages),
        )
        stream = StreamHandler(turns, router, ChatStreamExecutor(rag, generator, handlers))
        stack.push_async_callback(stream.drain)  # runs before the stores close (LIFO)

        yield ServiceContainer(
            chat=ChatHandler(turns, router, GeneralChat(generator), rag),
            stream=stream,
            history=HistoryService(store),
            feedback=FeedbackService(store),
            catalog=catalog,
            agent_types=pool.available_agent_types,
            probes=(NamedProbe("conversation_store", store.ping), NamedProbe("knowledge_store", knowledge.ping)),
            generation_mode=generator.mode.value,
        )


@asynccontextmanager
async def open_ingestion(settings: Settings) -> AsyncIterator[IngestionService]:
    """Only what ingestion needs: no conversation store, no chat model."""
    async with AsyncExitStack() as stack:
        catalog = KnowledgeBaseRegistry.from_file(settings.kb_registry_path)
        knowledge = await _open_knowledge(settings, stack)
        yield _ingestion(settings, catalog, knowledge, _build_embedder(settings))
