"""Postgres faults on a private cluster (tests/support/pg_cluster.py): down at start-up, stopped and restarted
under a running service, lost in the middle of a stream. The service is never restarted."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from tests.faults.helpers import error_messages, messages, new_session, poll, read_stream_with, ready
from tests.support.fault_report import outcome, owed, owed_response
from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.pg_cluster import PgCluster
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import StreamCapture, read_stream

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

UNSAVED = "the answer could not be saved to the conversation history"
RECOVERY_S = 15  # how long the service may take to notice that Postgres is back


def _settings(data_dir: Path, cluster: PgCluster, llm: ScriptedLLM) -> Any:
    return make_settings(data_dir, CONVERSATION_STORE="postgres", POSTGRES_DSN=cluster.dsn, **llm_settings(llm))


def _general(session: str, message: str) -> dict[str, Any]:
    return {"session_id": session, "message": message, "kb_prefix": "general"}


def _refused(response: httpx.Response | StreamCapture, cluster: PgCluster) -> str:
    """The error code of a refused request; asserts it is the store's clear 503, which names the request but
    not the store's address, user or driver error (those are in the log line of that request)."""
    status = response.status_code
    body = response.json() if isinstance(response, httpx.Response) else orjson.loads(bytes(response.raw))
    assert status == 503, body
    error = body["error"]
    assert error["code"] == "store_unavailable"
    assert "store" in error["message"] and "unavailable" in error["message"], error
    assert error["request_id"] == response.headers["x-request-id"]
    text = str(body)
    assert [leak for leak in ("127.0.0.1", str(cluster.port), "postgres", "Postgres", "Error") if leak in text] == []
    return f"HTTP 503 {error['code']}"


async def _until_ready(http: httpx.AsyncClient) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        body = await ready(http)
        return body if body["ready"] else None

    return await poll(check, RECOVERY_S, "the service did not report ready after Postgres came back")


async def _rows_of_request(cluster: PgCluster, request_id: str) -> dict[str, int]:
    """Stored messages of one request by role, read straight from the database."""
    conn = await asyncpg.connect(cluster.dsn)
    try:
        rows = await conn.fetch(
            "SELECT role, count(*) AS n FROM messages WHERE request_id = $1 GROUP BY role", request_id
        )
    finally:
        await conn.close()
    return {row["role"]: int(row["n"]) for row in rows}


async def test_postgres_down_at_start_up_then_up_without_a_restart(
    data_dir: Path, pg_cluster: PgCluster, scripted_llm: ScriptedLLM, fault_report: Any
) -> None:
    scripted_llm.default = Reply(tokens=["back", " again"])
    session = new_session()
    with live_server(_settings(data_dir, pg_cluster, scripted_llm)) as running:  # the cluster is not started
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            assert (await http.get("/health")).json() == {"status": "ok"}
            down = await ready(http)
            assert down["ready"] is False
            assert down["checks"]["conversation_store"] == "unavailable"
            assert down["checks"]["knowledge_store"] == "ok"
            assert down["checks"]["job_store"] == "unavailable"  # the jobs are in the same Postgres

            chat = await http.post("/api/v1/chat", json=_general(session, "first try"))
            stream = await read_stream(http, "/api/v1/chat/stream", _general(session, "second try"))
            listing = await http.get(f"/api/v1/conversations/{session}/messages")
            refused = [_refused(chat, pg_cluster), _refused(stream, pg_cluster), _refused(listing, pg_cluster)]
            assert scripted_llm.requests == []  # nothing is generated for a message that could not be stored

            await asyncio.to_thread(pg_cluster.start)
            started = time.monotonic()
            up = await _until_ready(http)
            recovered_s = time.monotonic() - started
            assert up["checks"] == {"conversation_store": "ok", "knowledge_store": "ok", "job_store": "ok"}
            answered = await read_stream(http, "/api/v1/chat/stream", _general(session, "third try"))
            stored = await messages(http, session)

    assert outcome(answered) == "done" and answered.text == "back again"
    # The refused messages were never stored (their clients got a 503); the accepted turn is there once.
    assert [(m["role"], m["content"], m["completed"]) for m in stored] == [
        ("user", "third try", True),
        ("assistant", "back again", True),
    ]
    fault_report(
        "Postgres down at start-up, then started",
        "private cluster not started when the service starts; `pg_ctl start` later",
        requests=3,
        messages_expected=owed_response(chat) + owed(stream) + owed(answered),
        messages_stored=len(stored),
        outcomes=[*refused[:2], outcome(answered)],
        notes=f"/ready true {recovered_s:.2f} s after Postgres accepted connections; no restart",
    )


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_postgres_stopped_and_restarted_mid_run_the_pool_recovers(
    data_dir: Path, pg_cluster: PgCluster, scripted_llm: ScriptedLLM, fault_report: Any, mode: str
) -> None:
    scripted_llm.default = Reply(tokens=["fine"])
    await asyncio.to_thread(pg_cluster.start)
    session = new_session()
    with live_server(_settings(data_dir, pg_cluster, scripted_llm)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            before = await read_stream(http, "/api/v1/chat/stream", _general(session, "before"))
            assert outcome(before) == "done"

            await asyncio.to_thread(pg_cluster.stop, mode)
            assert (await ready(http))["ready"] is False
            during_stream = await read_stream(http, "/api/v1/chat/stream", _general(session, "during"))
            during_chat = await http.post("/api/v1/chat", json=_general(session, "during, not streamed"))
            refused = [_refused(during_stream, pg_cluster), _refused(during_chat, pg_cluster)]

            await asyncio.to_thread(pg_cluster.start)
            started = time.monotonic()
            await _until_ready(http)
            recovered_s = time.monotonic() - started
            after = await read_stream(http, "/api/v1/chat/stream", _general(session, "after"))
            after_chat = await http.post("/api/v1/chat", json=_general(session, "after, not streamed"))
            stored = await messages(http, session)

    assert outcome(after) == "done" and after_chat.status_code == 200
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "before"),
        ("assistant", "fine"),
        ("user", "after"),
        ("assistant", "fine"),
        ("user", "after, not streamed"),
        ("assistant", "fine"),
    ]
    fault_report(
        f"Postgres stopped and restarted mid-run ({mode})",
        f"`pg_ctl stop -m {mode}` under the running service, then `pg_ctl start`",
        requests=5,
        messages_expected=owed(before)
        + owed(during_stream)
        + owed_response(during_chat)
        + owed(after)
        + owed_response(after_chat),
        messages_stored=len(stored),
        outcomes=[outcome(before), *refused, outcome(after), "done" if after_chat.status_code == 200 else "?"],
        notes=f"/ready true {recovered_s:.2f} s after the restart; no service restart",
    )


@pytest.mark.parametrize("back_before_the_end", [False, True], ids=["still-down-at-the-end", "back-before-the-end"])
async def test_postgres_lost_mid_stream(
    data_dir: Path, pg_cluster: PgCluster, scripted_llm: ScriptedLLM, fault_report: Any, back_before_the_end: bool
) -> None:
    tokens = [f"w{i} " for i in range(24)]
    scripted_llm.script(Reply(tokens=tokens, delay_s=0.05))
    await asyncio.to_thread(pg_cluster.start)
    session = new_session()
    crashed_at: list[int] = []

    async def inject(capture: StreamCapture) -> None:
        received = len(capture.of("token"))
        if capture.statuses[-1] != "token":
            return
        if received == 3:  # crash Postgres while the answer is being streamed
            await asyncio.to_thread(pg_cluster.stop, "immediate")
            crashed_at.append(received)
        elif received == 8 and back_before_the_end:
            await asyncio.to_thread(pg_cluster.start)

    with live_server(_settings(data_dir, pg_cluster, scripted_llm)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            capture = await read_stream_with(http, _general(session, "tell me a long story"), inject)
            if not back_before_the_end:
                await asyncio.to_thread(pg_cluster.start)
                await _until_ready(http)
            stored = await messages(http, session)
    request_id = capture.events[0]["request_id"]
    rows = await _rows_of_request(pg_cluster, request_id)

    assert crashed_at == [3]
    assert capture.statuses[0] == "start" and capture.statuses[-1] == "done"
    assert capture.text == "".join(tokens)  # the model went on; only the store was away
    done = capture.events[-1]
    if back_before_the_end:
        # The pool reconnected for the final save: the whole answer, once.
        assert "error" not in capture.statuses
        assert rows == {"user": 1, "assistant": 1}
        assert [(m["role"], m["content"], m["completed"]) for m in stored] == [
            ("user", "tell me a long story", True),
            ("assistant", "".join(tokens), True),
        ]
        assert done["message_id"] == stored[1]["id"]
    else:
        # The save failed: the client is told (error, then done without a message id), and nothing half-written
        # is left behind. The user message, stored before the stream opened, is there exactly once.
        assert capture.statuses[-2:] == ["error", "done"]
        assert error_messages(capture) == [UNSAVED]
        assert done["message_id"] is None
        assert rows == {"user": 1}
        assert [(m["role"], m["content"]) for m in stored] == [("user", "tell me a long story")]
    fault_report(
        "Postgres lost mid-stream" + (", back before the answer ends" if back_before_the_end else ""),
        "`pg_ctl stop -m immediate` after the 3rd token"
        + (", `pg_ctl start` after the 8th" if back_before_the_end else ""),
        requests=1,
        messages_expected=owed(capture),
        messages_stored=len(stored),
        outcomes=[outcome(capture)],
        notes="done names the stored answer"
        if back_before_the_end
        else "done has message_id null: the client is told the answer was not saved",
    )
