"""Settings come in groups, yet every setting is still read from its own environment variable, as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from backend.infrastructure.config.settings import (
    AuthEnv,
    AuthMode,
    ConversationStoreEnv,
    EnvGroup,
    RoutingEnv,
    Settings,
    StoreKind,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No setting in the environment, and a working directory without a `.env`."""
    for variable in Settings.variables():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_field_is_read_from_one_upper_case_variable_of_its_own() -> None:
    seen: list[str] = []
    for group in Settings.groups().values():
        assert issubclass(group, EnvGroup)
        for name, field in group.model_fields.items():
            assert field.alias and field.alias.isupper(), (group.__name__, name)
            seen.append(field.alias)
    assert len(seen) == len(set(seen)) == len(Settings.variables())


def test_each_group_reads_its_variables_from_the_environment_and_env_file(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / ".env").write_text("KB_AUTO_ROUTE=false\nRAG_TOP_K=3\nLLM_MODEL=from-file\n", encoding="utf-8")
    monkeypatch.setenv("LLM_MODEL", "from-environment")  # the environment beats .env
    monkeypatch.setenv("chunk_tokens", "120")  # names are not case-sensitive, as before
    settings = Settings()
    assert settings.routing.auto_route is False
    assert settings.retrieval.top_k == 3
    assert settings.llm.model == "from-environment"
    assert settings.ingestion.chunk_tokens == 120
    assert settings.server.data_dir == Path("data")  # the defaults otherwise


def test_field_names_and_nested_names_are_not_variables(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AUTO_ROUTE": "false", "MODEL": "x", "STORE": "memory", "MODE": "none"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ROUTING__AUTO_ROUTE", "false")
    monkeypatch.setenv("ROUTING", '{"KB_AUTO_ROUTE": false}')
    settings = Settings()
    assert settings.routing.auto_route is True
    assert settings.llm.model is None
    assert settings.conversations.store is StoreKind.AUTO
    assert settings.auth.mode is AuthMode.API_KEY


def test_load_takes_values_by_variable_name_over_the_environment(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / ".env").write_text("RAG_TOP_K=3\n", encoding="utf-8")
    monkeypatch.setenv("HOST", "0.0.0.0")
    settings = Settings.load(env_file=None, PORT=9000, KB_AUTO_ROUTE_OVERRIDE=True)
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 9000)
    assert settings.routing.allow_override is True
    assert settings.retrieval.top_k == 8  # env_file=None: the .env is not read
    assert Settings.load().retrieval.top_k == 3
    with pytest.raises(ValueError, match="KB_AUTOROUTE"):
        Settings.load(env_file=None, KB_AUTOROUTE=False)


def test_a_group_can_be_handed_over_whole(clean_env: Path) -> None:
    settings = Settings(routing=RoutingEnv(KB_AUTO_ROUTE=False))
    assert settings.routing.auto_route is False
    assert settings.retrieval.top_k == 8


def test_validation_still_applies_to_each_variable(clean_env: Path) -> None:
    with pytest.raises(ValidationError, match="KB_AUTO_ROUTE_MIN_CONFIDENCE"):
        Settings.load(env_file=None, KB_AUTO_ROUTE_MIN_CONFIDENCE=1.5)
    with pytest.raises(ValidationError, match="CHUNK_TOKENS"):
        Settings.load(env_file=None, CHUNK_TOKENS=16)
    with pytest.raises(ValidationError, match="EMBEDDING_ENGINE"):
        Settings.load(env_file=None, EMBEDDING_ENGINE="torch")


def test_blank_addresses_and_names_are_unset(clean_env: Path) -> None:
    blank = ("LLM_BASE_URL", "LLM_MODEL", "EMBEDDING_BASE_URL", "POSTGRES_HOST", "NEO4J_URI", "NEO4J_DATABASE")
    settings = Settings.load(env_file=None, **dict.fromkeys(blank, "  "))
    assert settings.llm.base_url is settings.llm.model is settings.embeddings.base_url is None
    assert settings.conversations.postgres_host is None
    assert settings.knowledge.neo4j_uri is settings.knowledge.neo4j_database is None
    assert not settings.llm.configured


def test_secrets_stay_secret(clean_env: Path) -> None:
    secrets = {
        "API_KEYS": "key-one=alice",
        "LLM_API_KEY": "sk-llm-secret",
        "EMBEDDING_API_KEY": "sk-embedding-secret",
        "POSTGRES_PASSWORD": "pg-secret",
        "POSTGRES_DSN": "postgresql://u:dsn-secret@h/db",
        "NEO4J_PASSWORD": "neo4j-secret",
    }
    shown = repr(Settings.load(env_file=None, **secrets)) + str(Settings.load(env_file=None, **secrets))
    for value in secrets.values():
        assert value not in shown


def test_derived_values(clean_env: Path) -> None:
    auth = AuthEnv(API_KEYS=" k1=alice , bad, k2=bob", ADMIN_USERS="alice, ,carol")
    assert auth.api_key_map() == {"k1": "alice", "k2": "bob"}
    assert auth.admin_user_ids() == {"alice", "carol"}
    assert auth.effective_rate_limit_per_minute() == 120
    assert AuthEnv(AUTH_MODE="none").effective_rate_limit_per_minute() == 0
    assert AuthEnv(AUTH_MODE="none", RATE_LIMIT_PER_MINUTE=5).effective_rate_limit_per_minute() == 5
    store = ConversationStoreEnv(POSTGRES_HOST="db", POSTGRES_PASSWORD="p@ss")
    assert store.resolved_postgres_dsn() == "postgresql://postgres:p%40ss@db:5432/graphrag_chat"
    assert ConversationStoreEnv(POSTGRES_DSN=" postgresql://x/y ").resolved_postgres_dsn() == "postgresql://x/y"
    assert ConversationStoreEnv().resolved_postgres_dsn() is None
