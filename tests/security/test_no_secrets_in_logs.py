"""No secret reaches a log line: the server runs at DEBUG with known secrets, requests that log are driven
(a model error that echoes the model key, a Postgres DSN with its password that cannot be reached, a Neo4j
URI with a password in it, wrong and key-like credentials, keys in query strings and paths, a `full` debug
run), and every record of every logger — the app's, the libraries', uvicorn's — is searched for them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from uvicorn.lifespan.on import LifespanOn

from backend.infrastructure.config.settings import Settings
from backend.infrastructure.logging import MASK, configure_logging, mask_secrets
from backend.main import build_app
from tests.support.live_server import live_server, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import read_stream

ALICE_KEY = "alice-Q9w8e7r6t5y4u3"
LLM_KEY = "llm-Z7x6c5v4b3n2m1"  # not shaped like a key: only knowing the value masks it
EMBEDDING_KEY = "emb-P0o9i8u7y6t5"
PG_PASSWORD = "pgpw-K1j2h3g4f5d6"
DSN_PASSWORD = "dsnpw-R4t5y6u7i8o9"
NEO4J_PASSWORD = "neo-W2e3r4t5y6u7"
NEO4J_URI_PASSWORD = "uripw-A9s8d7f6g5h4"  # only inside NEO4J_URI: masked by its shape
KEY_LIKE_GUESS = "sk-guess0123456789abcdef"
SECRETS = (ALICE_KEY, LLM_KEY, EMBEDDING_KEY, PG_PASSWORD, DSN_PASSWORD, NEO4J_PASSWORD, NEO4J_URI_PASSWORD)


def secret_settings(data_dir: Path, scripted_llm: ScriptedLLM, **overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "LOG_LEVEL": "DEBUG",
        "AUTH_MODE": "api_key",
        "API_KEYS": f"{ALICE_KEY}=alice",
        "ADMIN_USERS": "alice",
        "LLM_BASE_URL": scripted_llm.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": LLM_KEY,
        "LLM_MAX_RETRIES": 0,
        "EMBEDDING_API_KEY": EMBEDDING_KEY,
        "POSTGRES_PASSWORD": PG_PASSWORD,
        "NEO4J_PASSWORD": NEO4J_PASSWORD,
        "DEBUG_LEVEL": "full",
    }
    values.update(overrides)
    return values


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at DEBUG and up, from the root and from uvicorn's loggers (whatever their propagation)."""
    uvicorn_loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    for logger in uvicorn_loggers:
        logger.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    try:
        yield caplog
    finally:
        for logger in uvicorn_loggers:
            logger.removeHandler(caplog.handler)


def leaked(records: list[logging.LogRecord], formatted: str) -> list[str]:
    texts = [formatted]
    for record in records:
        texts += [record.getMessage(), record.exc_text or "", record.stack_info or ""]
        if record.exc_info:
            texts.append(logging.Formatter().formatException(record.exc_info))
    return [secret for secret in (*SECRETS, KEY_LIKE_GUESS) if any(secret in text for text in texts)]


async def drive_a_server_with_a_failing_model(base_url: str, scripted_llm: ScriptedLLM) -> list[str]:
    """The requests that log; returns the response bodies."""
    alice = {"Authorization": f"Bearer {ALICE_KEY}"}
    echo = f"Incorrect API key provided: {LLM_KEY}. Authorization: Bearer {LLM_KEY}"
    scripted_llm.default = Reply(status=401, error_message=echo)  # every call fails: routing and answering
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        responses = [
            await http.post("/api/v1/chat", json={"session_id": "s1", "message": "hi"}, headers=alice),
            await http.get("/api/v1/kbs", headers={"Authorization": f"Bearer {KEY_LIKE_GUESS}"}),
            await http.get("/api/v1/kbs", headers={"X-API-Key": ALICE_KEY + "-wrong"}),
            await http.get(f"/api/v1/conversations/{ALICE_KEY}/messages", headers=alice),
            await http.get("/api/v1/conversations/s1/messages", params={"api_key": ALICE_KEY}, headers=alice),
            await http.get("/v1/models", params={"token": KEY_LIKE_GUESS}),
        ]
        stream = await read_stream(
            http, "/api/v1/chat/stream", {"session_id": "s2", "message": "hi", "debug": "full"}, headers=alice
        )
        scripted_llm.default = Reply(tokens=["fine"])
        ok = await read_stream(
            http, "/api/v1/chat/stream", {"session_id": "s3", "message": "hello", "debug": "full"}, headers=alice
        )
    assert responses[0].status_code == 502, responses[0].text
    assert [r.status_code for r in responses[1:3]] == [401, 401]
    assert "error" in stream.statuses and stream.statuses[-1] == "done"
    assert ok.text == "fine"
    return [response.text for response in responses] + [bytes(stream.raw).decode(), bytes(ok.raw).decode()]


async def start_up(settings: Settings) -> bool:
    """Run the app's start-up as uvicorn does (uvicorn logs the failure), without uvicorn's exit on failure."""
    config = uvicorn.Config(build_app(settings), log_config=None, lifespan="on")
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    if lifespan.should_exit:
        return False
    await lifespan.shutdown()
    return True


async def test_no_secret_appears_in_any_log_line(
    data_dir: Path, scripted_llm: ScriptedLLM, all_logs: pytest.LogCaptureFixture
) -> None:
    answers: list[str] = []
    with live_server(make_settings(data_dir, **secret_settings(data_dir, scripted_llm))) as running:
        answers += await drive_a_server_with_a_failing_model(running.base_url, scripted_llm)

    unreachable_postgres = secret_settings(
        data_dir,
        scripted_llm,
        CONVERSATION_STORE="postgres",
        POSTGRES_DSN=f"postgresql://app:{DSN_PASSWORD}@127.0.0.1:1/chat",
    )
    with live_server(make_settings(data_dir, **unreachable_postgres)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            alice = {"X-API-Key": ALICE_KEY}
            ready = await http.get("/ready")
            chat = await http.post("/api/v1/chat", json={"session_id": "s1", "message": "hi"}, headers=alice)
    assert (ready.status_code, chat.status_code) == (503, 503)
    answers += [ready.text, chat.text]

    unreachable_neo4j = secret_settings(
        data_dir, scripted_llm, GRAPH_STORE="neo4j", NEO4J_URI=f"bolt://neo4j:{NEO4J_URI_PASSWORD}@127.0.0.1:1"
    )
    assert not await start_up(make_settings(data_dir, **unreachable_neo4j))

    records = all_logs.records
    messages = [record.getMessage() for record in records]
    # The scenarios really logged: the model's 502, the access lines with the key in the path and query,
    # the Postgres store that could not connect, the start-up that failed on Neo4j, and library debug output.
    assert any("502" in message and "model" in message for message in messages)
    access = [record.getMessage() for record in records if record.name == "uvicorn.access"]
    assert any("/api/v1/conversations/" in line for line in access)
    assert any("conversation store" in message for message in messages)
    assert any("Traceback (most recent call last)" in message and "Neo4j" in message for message in messages)
    assert any(record.levelno == logging.DEBUG and not record.name.startswith("backend") for record in records)
    assert MASK in all_logs.text
    assert leaked(records, all_logs.text) == []
    # Nor do the answers carry a server-side secret (a caller's own key in its own path is echoed back to it).
    server_side = (LLM_KEY, EMBEDDING_KEY, PG_PASSWORD, DSN_PASSWORD, NEO4J_PASSWORD, NEO4J_URI_PASSWORD)
    assert [secret for secret in server_side if any(secret in answer for answer in answers)] == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("neo4j at bolt://neo4j:pw-0123@db:7687 failed", "pw-0123"),
        ("GET https://user:hunter2@models.example/v1", "hunter2"),
        ("postgres+asyncpg://app:s3cr3t@db/chat", "s3cr3t"),
    ],
)
def test_a_password_in_any_urls_user_info_is_masked(text: str, secret: str) -> None:
    assert secret not in mask_secrets(text)
    assert f"{MASK}@" in mask_secrets(text)


def test_records_are_masked_for_every_handler_and_configuring_again_keeps_foreign_handlers() -> None:
    seen: list[logging.LogRecord] = []
    foreign = logging.Handler()
    foreign.emit = seen.append  # type: ignore[method-assign]
    root = logging.getLogger()
    original_factory, original_level, original_handlers = logging.getLogRecordFactory(), root.level, root.handlers[:]
    root.addHandler(foreign)
    try:
        configure_logging("INFO", ["first-secret-value"])
        configure_logging("INFO", ["second-secret-value"])  # replaces our handler and the factory, not theirs
        assert foreign in root.handlers
        assert sum(type(handler).__name__ == "_ConsoleHandler" for handler in root.handlers) == 1
        logger = logging.getLogger("test.unpropagated")
        logger.propagate = False  # a library logger with its own handler never reaches ours
        logger.addHandler(foreign)
        logger.warning("key %s and %s", "second-secret-value", "first-secret-value")
        try:
            raise RuntimeError("failed with second-secret-value")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logging.setLogRecordFactory(original_factory)
        root.handlers[:] = original_handlers
        root.setLevel(original_level)
    assert seen[0].getMessage() == f"key {MASK} and first-secret-value"  # the factory in force masks its secrets
    assert "second-secret-value" not in (seen[1].exc_text or "") and MASK in (seen[1].exc_text or "")


@pytest.mark.parametrize(("level", "client_level"), [("INFO", logging.WARNING), ("DEBUG", logging.DEBUG)])
def test_http_client_request_lines_show_only_at_debug(level: str, client_level: int) -> None:
    # Each model request is logged once, by the model adapter; httpx's own INFO line would repeat it.
    root = logging.getLogger()
    original_factory, original_level, original_handlers = logging.getLogRecordFactory(), root.level, root.handlers[:]
    try:
        configure_logging(level)
        for name in ("httpx", "httpx2", "httpcore2"):
            assert logging.getLogger(name).getEffectiveLevel() == client_level
    finally:
        logging.setLogRecordFactory(original_factory)
        root.handlers[:] = original_handlers
        root.setLevel(original_level)
        for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
            logging.getLogger(name).setLevel(logging.NOTSET)
