"""Neo4j down under a running service, on a private Neo4j (tests/support/private_neo4j.py) that the test kills.

Why a server of its own and a kill, rather than a URI where nothing listens: the fault that matters in
production is the database going away under live traffic — with the driver's pooled connections, routing
table and retries in play. The same server is then started again on its data. Neo4j down at start-up is the
last test: the shared test server behind a switchable proxy that is not started yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from backend.bootstrap import open_knowledge_service
from tests.e2e.conftest import SAMPLE_DOCUMENTS
from tests.faults.helpers import error_messages, messages, new_session, poll, ready
from tests.support.fault_report import outcome, owed, owed_response
from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.neo4j import Neo4jServer
from tests.support.private_neo4j import PrivateNeo4j
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import StreamCapture, read_stream
from tests.support.tcp_forwarder import TcpForwarder, closed_port

pytestmark = pytest.mark.slow

FOUNDED = "When was Wrenfield Orchard founded, and by whom?"
AGENT_TIMEOUT_S = 5.0


@pytest.fixture
def neo4j(tmp_path: Path) -> Iterator[PrivateNeo4j]:
    server = PrivateNeo4j(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _settings(data_dir: Path, neo4j: PrivateNeo4j, llm: ScriptedLLM | None = None) -> Any:
    return make_settings(
        data_dir,
        GRAPH_STORE="neo4j",
        NEO4J_URI=neo4j.uri,
        NEO4J_USER="neo4j",
        NEO4J_PASSWORD="",
        RAG_AGENT_TIMEOUT_S=AGENT_TIMEOUT_S,
        **(llm_settings(llm) if llm is not None else {}),
    )


async def _ingest(data_dir: Path, neo4j: PrivateNeo4j) -> None:
    async with open_knowledge_service(_settings(data_dir, neo4j)) as knowledge:
        report = await knowledge.ingest("orchard", knowledge.load_files([SAMPLE_DOCUMENTS]))
    assert report.documents_added == 6


async def _stream(http: httpx.AsyncClient, session: str, message: str, kb: str | None) -> tuple[StreamCapture, float]:
    body: dict[str, Any] = {"session_id": session, "message": message}
    if kb is not None:
        body["kb_prefix"] = kb
    started = time.monotonic()
    capture = await read_stream(http, "/api/v1/chat/stream", body)
    return capture, time.monotonic() - started


async def test_neo4j_down_fails_rag_clearly_while_general_chat_and_history_keep_working(
    tmp_path: Path, neo4j: PrivateNeo4j, scripted_llm: ScriptedLLM, fault_report: Any
) -> None:
    data_dir = tmp_path / "data"
    await _ingest(data_dir, neo4j)
    scripted_llm.default = Reply(tokens=["Founded", " in", " 1921", " [1]."])
    rag, general, auto = new_session("rag"), new_session("general"), new_session("auto")
    with live_server(_settings(data_dir, neo4j, scripted_llm)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=60) as http:
            before, _ = await _stream(http, rag, FOUNDED, "orchard")
            assert outcome(before) == "done" and before.of("citations")[0]["content"]

            await asyncio.to_thread(neo4j.kill)
            down = await ready(http)
            failed, failed_after = await _stream(http, rag, FOUNDED, "orchard")
            chatted, chatted_after = await _stream(http, general, "Hello! How are you today?", "general")
            routed, routed_after = await _stream(http, auto, "Hello! How are you today?", None)
            plain = await http.post("/api/v1/chat", json={"session_id": general, "message": "And now?"})
            during = {session: await messages(http, session) for session in (rag, general, auto)}

            await asyncio.to_thread(neo4j.restart)
            restarted = time.monotonic()

            async def back() -> dict[str, Any] | None:
                body = await ready(http)
                return body if body["ready"] else None

            await poll(back, 30, "the service did not see Neo4j come back")
            recovered_s = time.monotonic() - restarted
            after, _ = await _stream(http, rag, FOUNDED, "orchard")
            stored = {session: await messages(http, session) for session in (rag, general, auto)}

    # Readiness names the store that is down; the conversation store is fine.
    assert down["ready"] is False and down["checks"]["conversation_store"] == "ok"
    assert down["checks"]["knowledge_store"] == "unavailable"
    # A RAG request ends with a clear error event and done, within the agents' time limit.
    assert failed.status_code == 200 and failed.statuses[-2:] == ["error", "done"], failed.statuses
    assert "token" not in failed.statuses
    assert failed_after < AGENT_TIMEOUT_S + 5, failed_after
    error = " ".join(error_messages(failed))
    assert ("retriev" in error or "knowledge store" in error) and "Neo4j" not in error, error
    # General chat — named or chosen by the router — and history keep working.
    for capture in (chatted, routed):
        assert outcome(capture) == "done" and capture.text == "Founded in 1921 [1].", capture.events[-3:]
    assert plain.status_code == 200, plain.text
    assert [m["role"] for m in during[general]] == ["user", "assistant"] * 2
    assert [(m["role"], m["completed"]) for m in during[rag]] == [
        ("user", True),
        ("assistant", True),
        ("user", True),
        ("assistant", False),
    ]
    # Neo4j back on its data: RAG works again, without a restart of the service.
    assert outcome(after) == "done" and after.of("citations")[0]["content"]
    assert len(stored[rag]) == 6
    fault_report(
        "Neo4j down",
        "private Neo4j killed (SIGKILL) under the running service, then restarted on its data",
        requests=6,
        messages_expected=sum(owed(c) for c in (before, failed, chatted, routed, after)) + owed_response(plain),
        messages_stored=sum(len(history) for history in stored.values()),
        outcomes=[outcome(c) for c in (before, failed, chatted, routed)]
        + ["done" if plain.status_code == 200 else f"HTTP {plain.status_code}", outcome(after)],
        notes=f"RAG error+done after {failed_after:.1f} s (RAG_AGENT_TIMEOUT_S={AGENT_TIMEOUT_S:g}): {error!r}; "
        "general chat "
        f"{chatted_after:.1f} s named, {routed_after:.1f} s routed; /ready true {recovered_s:.2f} s after "
        "Neo4j was back",
    )


async def test_the_service_starts_while_neo4j_is_down_and_uses_it_once_it_answers(
    data_dir: Path, neo4j_server: Neo4jServer, scripted_llm: ScriptedLLM
) -> None:
    real = urlsplit(neo4j_server.uri)
    proxy = TcpForwarder(closed_port(), real.hostname or "127.0.0.1", real.port or 7687)
    settings = make_settings(
        data_dir,
        GRAPH_STORE="neo4j",
        NEO4J_URI=f"{real.scheme}://127.0.0.1:{proxy.port}",
        NEO4J_USER=neo4j_server.user,
        NEO4J_PASSWORD=neo4j_server.password,
        RAG_AGENT_TIMEOUT_S=AGENT_TIMEOUT_S,
        **llm_settings(scripted_llm),
    )
    with live_server(settings) as server:  # starts although Neo4j does not answer
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            readiness = await http.get("/ready")
            assert readiness.status_code == 503
            assert readiness.json()["checks"]["conversation_store"] == "ok"
            assert readiness.json()["checks"]["knowledge_store"] != "ok"
            scripted_llm.script(Reply(tokens=["Hello", " there"]))
            general = await http.post(
                "/api/v1/chat", json={"session_id": new_session("up"), "message": "hi!", "kb_prefix": "general"}
            )
            assert general.status_code == 200 and general.json()["answer"] == "Hello there"
            try:
                await proxy.start()  # Neo4j answers now: no restart of the service

                async def knowledge_store_ok() -> bool | None:
                    return True if (await ready(http))["ready"] else None

                await poll(knowledge_store_ok, 90, "the service seeing Neo4j back")
                kbs = (await http.get("/api/v1/kbs")).json()
                assert "orchard" in [kb["kb_prefix"] for kb in kbs["knowledge_bases"]]
            finally:
                await proxy.stop()
