"""The composition root: the one place that turns settings into adapters and hands them to use cases.

Everything that holds a connection (the asyncpg pool, SQLite files, the Neo4j driver, HTTP clients)
is opened here, inside the FastAPI lifespan or a CLI command, and closed in reverse order when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

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
from backend.application.knowledge.evidence import KnowledgeViews
from backend.application.knowledge.indexing import GraphIndexer
from backend.application.knowledge.jobs import IngestionJobs, JobRunner
from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.knowledge.locks import KbLocks
from backend.application.knowledge.retrieval_service import RetrievalService
from backend.application.ports.chat_model import ChatModel
from backend.application.ports.conversation_store import ConversationStore
from backend.application.ports.graph_store import GraphStore
from backend.application.ports.ingestion import Extractor
from backend.application.ports.jobs import JobDispatcher
from backend.application.ports.router import FollowUps
from backend.application.rag.kb_handlers import KnowledgeBaseHandlerFactory
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.application.services import ServiceContainer
from backend.domain.jobs import BatchRef
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.community_summaries import CommunitySummarizer
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.agents.rag_factory.builders import AGENT_BUILDERS, AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.config.settings import (
    EmbeddingEnv,
    EmbeddingProvider,
    ExtractorKind,
    GraphStoreKind,
    IngestionEnv,
    JobStoreKind,
    LlmEnv,
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
from backend.infrastructure.jobs.embedded_worker import EmbeddedWorker
from backend.infrastructure.jobs.postgres_store import PostgresJobStore
from backend.infrastructure.jobs.procrastinate_queue import ProcrastinateQueue, ProcrastinateWorker
from backend.infrastructure.jobs.sqlite_store import SqliteJobStore
from backend.infrastructure.jobs.worker_process import WorkerMain, WorkerProcess
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
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.model_followups import ModelFollowUps
from backend.infrastructure.routing.profiles import CachedKbProfiles
from backend.infrastructure.routing.router_graph import RouterGraph

logger = logging.getLogger(__name__)

GRAPH_DB = "graph.db"
HISTORY_DB = "chat_history.db"
JOBS_DB = "jobs.db"
LLM_CACHE_DB = "llm_cache.db"


async def _open_conversation_store(settings: Settings, stack: AsyncExitStack) -> ConversationStore:
    conversations = settings.conversations
    kind = conversations.store
    dsn = conversations.resolved_postgres_dsn()
    if kind is StoreKind.POSTGRES or (kind is StoreKind.AUTO and dsn):
        if not dsn:
            raise ValueError("CONVERSATION_STORE=postgres needs POSTGRES_DSN or POSTGRES_HOST")
        postgres = await PostgresConversationStore.open(
            dsn, min_size=conversations.postgres_pool_min, max_size=conversations.postgres_pool_max
        )
        stack.push_async_callback(postgres.close)
        logger.info("conversation history: Postgres")
        return postgres
    if kind is StoreKind.MEMORY:
        logger.warning("conversation history: in memory (lost on restart)")
        return InMemoryConversationStore()
    sqlite = await SqliteConversationStore.open(settings.server.data_dir / HISTORY_DB)
    stack.push_async_callback(sqlite.close)
    logger.info("conversation history: SQLite file %s", settings.server.data_dir / HISTORY_DB)
    return sqlite


def _build_embedder(embeddings: EmbeddingEnv) -> TextEmbedder:
    if embeddings.provider is EmbeddingProvider.OPENAI:
        if not embeddings.base_url:
            raise ValueError("EMBEDDING_PROVIDER=openai needs EMBEDDING_BASE_URL")
        return OpenAICompatibleEmbedder(
            base_url=embeddings.base_url,
            api_key=embeddings.api_key.get_secret_value(),
            model=embeddings.model,
            dimension=embeddings.dimension,
            batch_size=embeddings.batch_size,
            multilingual=embeddings.multilingual is not False,
        )
    return MiniLMEmbedder.load(
        embeddings.model_dir,
        engine=embeddings.engine,
        multilingual=embeddings.multilingual is True,
        precision=embeddings.precision,
    )


def _build_chat_model(llm: LlmEnv, stack: AsyncExitStack) -> ChatModel | None:
    if not (llm.base_url and llm.model):
        return None
    # The LLM_* group holds exactly the client's parameters.
    model = OpenAICompatibleChatModel(**(llm.model_dump() | {"api_key": llm.api_key.get_secret_value()}))
    stack.push_async_callback(model.aclose)
    # Every call of a request counts against its budget and lands in its debug log, secrets masked.
    return AccountedChatModel(model, secrets=[llm.api_key.get_secret_value()])


async def _open_graph_store(
    settings: Settings, embedder: TextEmbedder, stack: AsyncExitStack, serving: bool
) -> GraphStore:
    """The knowledge graph. A server starts while Neo4j is down (it creates the schema when Neo4j answers, and
    /ready says so); the CLI, which has nothing to do without the graph, fails at once."""
    store: GraphStore
    knowledge = settings.knowledge
    kind = knowledge.store
    if kind is GraphStoreKind.NEO4J or (kind is GraphStoreKind.AUTO and knowledge.neo4j_uri):
        if not knowledge.neo4j_uri:
            raise ValueError("GRAPH_STORE=neo4j needs NEO4J_URI")
        store = await Neo4jGraphStore.open(
            knowledge.neo4j_uri,
            knowledge.neo4j_user,
            knowledge.neo4j_password.get_secret_value(),
            database=knowledge.neo4j_database,
            embedding_dimension=embedder.dimension,
            lazy=serving,
        )
        logger.info("knowledge graph: Neo4j")
    else:
        store = await EmbeddedGraphStore.open(settings.server.data_dir / GRAPH_DB)
        logger.info("knowledge graph: embedded SQLite file %s", settings.server.data_dir / GRAPH_DB)
    stack.push_async_callback(store.close)
    return store


def _uses_model_for_indexing(ingestion: IngestionEnv, model: ChatModel | None) -> bool:
    if ingestion.extractor is ExtractorKind.LLM and model is None:
        raise ValueError("EXTRACTOR=llm needs a chat model (LLM_BASE_URL and LLM_MODEL)")
    return ingestion.extractor is ExtractorKind.LLM or (ingestion.extractor is ExtractorKind.AUTO and model is not None)


async def _build_extractor(settings: Settings, model: ChatModel | None, stack: AsyncExitStack) -> Extractor:
    if model is None or not _uses_model_for_indexing(settings.ingestion, model):
        return OfflineExtractor()
    cache = await ExtractionCache.open(settings.server.data_dir / LLM_CACHE_DB)
    stack.push_async_callback(cache.close)
    return LlmExtractor(model, cache, max_concurrency=settings.ingestion.extraction_concurrency)


def _build_summarizer(ingestion: IngestionEnv, model: ChatModel | None) -> CommunitySummarizer:
    if model is not None and _uses_model_for_indexing(ingestion, model):
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
    ingestion = settings.ingestion
    settings.server.data_dir.mkdir(parents=True, exist_ok=True)
    stack.enter_context(single_threaded_blas())  # vector searches run side by side: see native_threads.py
    embedder = _build_embedder(settings.embeddings)
    store = await _open_graph_store(settings, embedder, stack, serving)
    registry = KnowledgeBaseRegistry.from_file(settings.knowledge.kb_registry_path)
    catalog = KnowledgeBaseCatalog(registry, store)
    locks = KbLocks()
    detector = CommunityBuilder(
        _build_summarizer(ingestion, model), max_cluster_size=ingestion.community_max_cluster_size
    )
    maintainer = CommunityMaintainer(store, embedder, detector)
    refresher: CommunityRefresher = maintainer
    if serving:
        deferred = DeferredRefresher(maintainer, locks, ingestion.community_refresh_delay_s)
        stack.push_async_callback(deferred.drain)
        refresher = deferred
    indexer = GraphIndexer(
        store,
        embedder,
        TokenChunker(ingestion.chunk_tokens, ingestion.chunk_overlap_tokens),
        await _build_extractor(settings, model, stack),
        refresher,
        locks,
    )
    service = KnowledgeService(catalog, FileDocumentLoader(), indexer)
    return _Knowledge(store, embedder, catalog, registry, service)


async def _serving_dispatcher(
    settings: Settings, jobs: _Jobs, stack: AsyncExitStack, main: WorkerMain
) -> JobDispatcher:
    """Batches go to the queue (Postgres: procrastinate; SQLite: the store is the queue), and the serving process's
    own worker process is started to take them (unless SERVE_WORKER is off)."""
    queue: JobDispatcher = jobs.queue if jobs.queue is not None else _RunHere()
    if not settings.ingestion.serve_worker:
        return queue

    async def waiting() -> bool:
        return bool(await jobs.store.unfinished_batches())

    worker = WorkerProcess(main, waiting, queue)
    await worker.start()
    stack.push_async_callback(worker.stop)
    return worker


@asynccontextmanager
async def open_services(
    settings: Settings, worker_main: Callable[[Settings], WorkerMain]
) -> AsyncIterator[ServiceContainer]:
    """`worker_main` gives the entry point of the ingestion worker process for these settings (backend/worker.py,
    an entry point like the server's)."""
    async with AsyncExitStack() as stack:
        store = await _open_conversation_store(settings, stack)
        model = _build_chat_model(settings.llm, stack)
        knowledge = await _open_knowledge(settings, model, stack, serving=True)
        job_store = await _open_jobs(settings, stack)
        catalog = knowledge.catalog
        chat, retrieval = settings.chat, settings.retrieval

        generator = AnswerGenerator(model, ExtractiveAnswerer(), chat.history_token_budget)
        resources = AgentResources(knowledge.store, knowledge.embedder, retrieval.top_k, model)
        pool = RAGAgentManager(AGENT_BUILDERS, resources, retrieval.agent_pool_max)
        limits = RetrievalLimits(retrieval.agent_timeout_s, retrieval.context_token_budget, retrieval.top_k)
        handlers = KnowledgeBaseHandlerFactory.from_knowledge_bases(knowledge.registry.list())
        rag = RagManager(pool, limits)
        routing = RoutingSettings(
            auto_route=settings.routing.auto_route,
            allow_override=settings.routing.allow_override,
            min_confidence=settings.routing.min_confidence,
        )
        policy = RoutingPolicy(routing, pool.available_agent_types)
        classifier = LlmIntentClassifier(model, CachedKbProfiles(knowledge.store)) if model is not None else None
        WordfreqRarity.warm_up()
        rarity = WordfreqRarity()
        content, offline = ContentRouter(knowledge.store, rarity), OfflineFollowUps(rarity)
        followups: FollowUps = offline
        if model is not None:  # one rewrite call for a follow-up that refers back, the offline query its fallback
            followups = ModelFollowUps(model, offline, settings.routing.llm_timeout_s)
        router = RouterGraph(catalog, policy, content, followups, classifier, settings.routing.llm_timeout_s)
        turns = TurnService(
            store,
            catalog,
            pool.available_agent_types,
            TurnLimits(chat.max_message_chars, chat.history_max_messages),
        )
        budgets = BudgetPolicy(chat.request_max_model_calls, chat.request_timeout_s)
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

        dispatcher = await _serving_dispatcher(settings, job_store, stack, worker_main(settings))
        jobs = IngestionJobs(knowledge.service, job_store.store, dispatcher, settings.ingestion.job_batch_documents)

        yield ServiceContainer(
            chat=ChatHandler(stream),
            stream=stream,
            history=HistoryService(store),
            feedback=FeedbackService(store),
            knowledge=knowledge.service,
            jobs=jobs,
            retrieval=RetrievalService(catalog, rag),
            views=KnowledgeViews(catalog, knowledge.store),
            agent_types=pool.available_agent_types,
            probes=(
                NamedProbe("conversation_store", store.ping),
                NamedProbe("knowledge_store", knowledge.store.ping),
                NamedProbe("job_store", job_store.store.ping),
            ),
            generation_mode=generator.mode.value,
        )


@asynccontextmanager
async def open_knowledge_service(settings: Settings) -> AsyncIterator[KnowledgeService]:
    """The KBs without jobs (the CLI's other commands, the benchmarks): communities are refreshed at the end of
    each indexing call."""
    async with AsyncExitStack() as stack:
        model = _build_chat_model(settings.llm, stack)
        knowledge = await _open_knowledge(settings, model, stack, serving=False)
        yield knowledge.service


class JobWorker(Protocol):
    async def run(self, job_id: str | None = None, until_idle: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class Ingestion:
    """What ingestion needs outside the server (the CLI, a worker): the KBs, their jobs, and a worker that runs
    the jobs' batches in this process."""

    knowledge: KnowledgeService
    jobs: IngestionJobs
    worker: JobWorker


class _RunHere:
    """The dispatcher of the embedded job store: the store is the queue, and any embedded worker on the same data
    folder takes its batches (the CLI's own, the serving process's, `python -m backend worker`)."""

    async def dispatch(self, batches: Sequence[BatchRef]) -> None:
        del batches


@dataclass(frozen=True, slots=True)
class _Jobs:
    store: SqliteJobStore | PostgresJobStore
    queue: ProcrastinateQueue | None  # with Postgres

    def worker(self, runner: JobRunner, stale_after_s: float) -> JobWorker:
        if self.queue is not None:
            return ProcrastinateWorker(self.queue, runner.run)
        assert isinstance(self.store, SqliteJobStore)
        return EmbeddedWorker(self.store, runner.run, stale_after_s=stale_after_s)


async def _open_jobs(settings: Settings, stack: AsyncExitStack) -> _Jobs:
    kind = settings.ingestion.job_store
    dsn = settings.conversations.resolved_postgres_dsn()
    if kind is JobStoreKind.POSTGRES or (kind is JobStoreKind.AUTO and dsn):
        if not dsn:
            raise ValueError("JOB_STORE=postgres needs POSTGRES_DSN or POSTGRES_HOST")
        postgres = await PostgresJobStore.open(dsn)
        stack.push_async_callback(postgres.close)
        queue = ProcrastinateQueue(dsn, postgres, settings.ingestion.job_stale_after_s)
        stack.push_async_callback(queue.close)
        logger.info("ingestion jobs: Postgres, queued by procrastinate")
        return _Jobs(postgres, queue)
    sqlite = await SqliteJobStore.open(settings.server.data_dir / JOBS_DB)
    stack.push_async_callback(sqlite.close)
    logger.info("ingestion jobs: SQLite file %s", settings.server.data_dir / JOBS_DB)
    return _Jobs(sqlite, None)


@asynccontextmanager
async def open_ingestion(settings: Settings) -> AsyncIterator[Ingestion]:
    """Communities are refreshed when a job is over, not in the background."""
    async with AsyncExitStack() as stack:
        model = _build_chat_model(settings.llm, stack)
        knowledge = await _open_knowledge(settings, model, stack, serving=False)
        jobs = await _open_jobs(settings, stack)
        ingestion = settings.ingestion
        runner = JobRunner(knowledge.service, jobs.store, ingestion.job_stale_after_s)
        dispatcher: JobDispatcher = jobs.queue if jobs.queue is not None else _RunHere()
        yield Ingestion(
            knowledge.service,
            IngestionJobs(knowledge.service, jobs.store, dispatcher, ingestion.job_batch_documents),
            jobs.worker(runner, ingestion.job_stale_after_s),
        )
