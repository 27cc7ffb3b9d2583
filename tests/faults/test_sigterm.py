"""SIGTERM while streams are in flight, against the real `python -m backend serve` process.

Short answers finish within the grace period; long ones are ended by the service with `error` and `done` when
it is over. No client sees a truncated frame, the process exits soon after, and after a restart every user
message and every answer (whole or partial, exactly as the client received it) is in the store.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.application.chat.stream_handler import SHUTDOWN_MESSAGE
from backend.cli import WIND_DOWN_S
from tests.faults.helpers import error_messages, messages, new_session, poll, read_stream_with
from tests.support.fault_report import outcome, owed
from tests.support.live_server import SAMPLE_REGISTRY, live_server, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.serve_process import ServeProcess
from tests.support.sse import StreamCapture

pytestmark = pytest.mark.slow

GRACE_S = 2.0
TOKEN_DELAY_S = 0.1
SHORT = [f"s{i} " for i in range(10)]  # about 1 s: finishes within the grace period
LONG = [f"l{i} " for i in range(80)]  # about 8 s: still running when the grace period is over
LONG_QUESTIONS = ("Tell me everything, at length.", "Tell me everything about Wrenfield Orchard's founding, at length.")
SHORT_QUESTIONS = ("Briefly: hello?", "Briefly: when was Wrenfield Orchard founded?")


@dataclass
class Client:
    session: str
    message: str
    kb_prefix: str
    capture: StreamCapture = field(default_factory=StreamCapture)
    ended_at: float = 0.0
    transport_error: str = ""

    @property
    def long(self) -> bool:
        return self.message in LONG_QUESTIONS

    async def run(self, http: httpx.AsyncClient) -> None:
        body = {"session_id": self.session, "message": self.message, "kb_prefix": self.kb_prefix}

        async def keep(capture: StreamCapture) -> None:
            self.capture = capture

        try:
            self.capture = await read_stream_with(http, body, keep)
        except httpx.HTTPError as error:  # a cut connection: what a truncated stream looks like to a client
            self.transport_error = f"{type(error).__name__}: {error}"
        self.ended_at = time.monotonic()


def _answer_for(body: dict[str, Any]) -> Reply:
    prompt = str(body["messages"][-1]["content"])  # the question itself, or a RAG prompt ending with it
    return Reply(tokens=LONG if prompt.endswith(LONG_QUESTIONS) else SHORT, delay_s=TOKEN_DELAY_S)


async def test_sigterm_lets_streams_finish_or_end_cleanly_and_loses_nothing(
    data_dir: Path, tmp_path: Path, scripted_llm: ScriptedLLM, fault_report: Any
) -> None:
    scripted_llm.responder = _answer_for
    settings = {
        "DATA_DIR": str(data_dir),
        "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY),
        "AUTH_MODE": "none",
        "CONVERSATION_STORE": "sqlite",
        "GRAPH_STORE": "embedded",
        "EXTRACTOR": "offline",
        "LLM_BASE_URL": scripted_llm.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "test-key",
        "LLM_MAX_RETRIES": "0",
        "SHUTDOWN_GRACE_S": str(GRACE_S),
        "LOG_LEVEL": "INFO",
    }
    clients = [
        Client(new_session("short"), SHORT_QUESTIONS[0], "general"),
        Client(new_session("short"), SHORT_QUESTIONS[1], "orchard"),
        Client(new_session("long"), LONG_QUESTIONS[0], "general"),
        Client(new_session("long"), LONG_QUESTIONS[1], "orchard"),
    ]
    with ServeProcess(settings, tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            streams = [asyncio.create_task(client.run(http)) for client in clients]

            async def all_streaming() -> bool | None:
                return all(len(client.capture.of("token")) >= 2 for client in clients) or None

            await poll(all_streaming, 30, "not every stream got its first tokens")
            server.send(signal.SIGTERM)
            signalled = time.monotonic()
            await asyncio.wait_for(asyncio.gather(*streams), GRACE_S + WIND_DOWN_S + 5)
        exit_code = await asyncio.to_thread(server.wait, GRACE_S + WIND_DOWN_S + 10)
        exited = time.monotonic() - signalled
        log = server.log()

    for client in clients:
        assert not client.transport_error, (client.message, client.transport_error, log[-3000:])
        capture = client.capture
        assert capture.statuses[0] == "start" and capture.statuses.count("done") == 1, capture.statuses
        assert capture.raw.endswith(b"\n\n") and outcome(capture) != "truncated"
        ended = client.ended_at - signalled
        if client.long:
            assert capture.statuses[-2:] == ["error", "done"], capture.statuses
            assert error_messages(capture) == [SHUTDOWN_MESSAGE]
            assert GRACE_S - 0.5 <= ended < GRACE_S + WIND_DOWN_S, ended
            assert 2 <= len(capture.of("token")) < len(LONG)
        else:
            assert outcome(capture) == "done" and capture.text == "".join(SHORT), (capture.events[-3:], log[-3000:])
            assert ended < GRACE_S, ended
    assert exit_code in (0, -signal.SIGTERM), log[-3000:]
    assert exited < GRACE_S + WIND_DOWN_S + 2, exited
    assert "timeout graceful shutdown exceeded" not in log  # uvicorn's backstop never had to cancel anything
    assert "Traceback" not in log, log[-3000:]

    # After a restart on the same data: every message, each answer exactly as its client received it.
    stored: dict[str, list[dict[str, Any]]] = {}
    with live_server(make_settings(data_dir)) as restarted:
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=30) as http:
            for client in clients:
                stored[client.session] = await messages(http, client.session)
    for client in clients:
        rows = stored[client.session]
        assert [(m["role"], m["content"]) for m in rows] == [
            ("user", client.message),
            ("assistant", client.capture.text),
        ]
        assert rows[1]["completed"] is not client.long
        assert rows[1]["id"] == client.capture.events[-1]["message_id"]
        if client.long:
            assert rows[1]["debug"]["error"] == SHUTDOWN_MESSAGE
    fault_report(
        "SIGTERM during streams",
        f"SIGTERM to `python -m backend serve` with 4 streams open (SHUTDOWN_GRACE_S={GRACE_S:g}): "
        "2 answers of ~1 s, 2 of ~8 s",
        requests=len(clients),
        messages_expected=sum(owed(client.capture) for client in clients),
        messages_stored=sum(len(rows) for rows in stored.values()),
        outcomes=[outcome(client.capture) for client in clients],
        notes=f"short streams done {max(c.ended_at for c in clients if not c.long) - signalled:.2f} s, long ones "
        f"error+done {max(c.ended_at for c in clients if c.long) - signalled:.2f} s after SIGTERM; "
        f"process exited after {exited:.2f} s",
    )
