"""Slow clients against the real `python -m backend serve` process, over raw sockets on 127.0.0.1.

A client trickling its request head or body one byte at a time is cut off when the part's deadline passes
(the deadline is for the whole part, not for the silence between bytes): with a 408 in its API's error shape
when it has no response yet, and a closed connection in every case. What must not be cut: a kept-alive
connection idle between requests, and a stream (SSE) that lasts longer than both deadlines.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.support.live_server import SAMPLE_REGISTRY
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.serve_process import ServeProcess
from tests.support.sse import read_stream

pytestmark = pytest.mark.slow

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.5
TRICKLE_EVERY_S = 0.3
GIVE_UP_S = 15.0  # every loop below ends by then, whatever the server does


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, scripted_llm_server: ScriptedLLM) -> Iterator[ServeProcess]:
    workdir = tmp_path_factory.mktemp("slow-clients")
    settings = {
        "DATA_DIR": str(workdir / "data"),
        "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY),
        "AUTH_MODE": "none",
        "CONVERSATION_STORE": "sqlite",
        "GRAPH_STORE": "embedded",
        "EXTRACTOR": "offline",
        "LLM_BASE_URL": scripted_llm_server.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "test-key",
        "LLM_MAX_RETRIES": "0",
        "HTTP_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "HTTP_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        "LOG_LEVEL": "INFO",
    }
    with ServeProcess(settings, workdir) as server:
        yield server
        log = server.log()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]  # a cut request is no server error


@dataclass
class Outcome:
    closed_after_s: float  # from the first byte sent
    sent: int  # bytes the server took before it closed
    received: bytes  # everything the server wrote

    @property
    def status(self) -> int:
        return int(self.received.split(b" ", 2)[1]) if self.received.startswith(b"HTTP/1.1 ") else 0

    def error(self) -> dict[str, str]:
        return dict(json.loads(self.received.partition(b"\r\n\r\n")[2])["error"])


def connect(server: ServeProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def read_to_end(sock: socket.socket, received: bytearray, until: float) -> bool:
    """Read until the server closes (True) or `until` passes (False)."""
    while time.monotonic() < until:
        readable, _, _ = select.select([sock], [], [], max(0.0, until - time.monotonic()))
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return True
        if not chunk:
            return True
        received.extend(chunk)
    return False


def trickle(sock: socket.socket, prefix: bytes, stop_on_response: bool = True) -> Outcome:
    """Send `prefix`, then one byte every TRICKLE_EVERY_S for ever, until the server closes the connection (or
    answers, with `stop_on_response`); then read what it wrote until it closes. Bounded by GIVE_UP_S."""
    started = time.monotonic()
    until = started + GIVE_UP_S
    received = bytearray()
    sent = 0
    closed = False
    sock.sendall(prefix)
    while not closed and time.monotonic() < until:
        readable, _, _ = select.select([sock], [], [], TRICKLE_EVERY_S)
        if readable:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            received.extend(chunk)
            closed = not chunk
            if stop_on_response and chunk:
                closed = read_to_end(sock, received, until)
            continue
        try:
            sock.sendall(b"a")
            sent += 1
        except (BrokenPipeError, ConnectionResetError):
            closed = True
    assert closed, f"the connection was still open after {GIVE_UP_S} s ({sent} bytes trickled)"
    return Outcome(time.monotonic() - started, sent, bytes(received))


def test_a_request_head_sent_a_byte_at_a_time_is_cut_with_a_408(serve: ServeProcess) -> None:
    with connect(serve) as sock:
        outcome = trickle(sock, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    assert outcome.sent >= 2  # the server did take bytes for a while: the head had no complete line yet
    assert outcome.closed_after_s >= HEADER_TIMEOUT_S - 0.1  # the whole head's deadline, not an idle timeout
    assert outcome.status == 408, outcome.received
    assert outcome.error()["code"] == "request_timeout"
    assert "request head" in outcome.error()["message"]


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(serve: ServeProcess) -> None:
    with connect(serve) as sock:
        started = time.monotonic()
        received = bytearray()
        closed = read_to_end(sock, received, started + GIVE_UP_S)
    assert closed and received == b""
    assert time.monotonic() - started >= HEADER_TIMEOUT_S - 0.1


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/api/v1/chat", {"code", "message"}), ("/v1/chat/completions", {"message", "type", "param", "code"})],
)
def test_a_body_that_never_completes_is_cut_with_a_408_in_the_apis_shape(
    serve: ServeProcess, path: str, shape: set[str]
) -> None:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
    with connect(serve) as sock:
        outcome = trickle(sock, head.encode() + b'\r\n{"message": "')
    assert outcome.sent >= 2
    assert outcome.closed_after_s >= BODY_TIMEOUT_S - 0.1
    assert outcome.status == 408, outcome.received
    error = outcome.error()
    assert set(error) == shape and error["code"] == "request_timeout"
    assert "request body" in error["message"]


def test_a_body_trickled_after_an_early_answer_is_cut_too(serve: ServeProcess) -> None:
    """The app answers 404 without reading the body; the rest of the body may not be trickled for ever."""
    head = b"POST /api/v1/no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"
    with connect(serve) as sock:
        outcome = trickle(sock, head + b"x", stop_on_response=False)
    assert outcome.status == 404, outcome.received
    assert outcome.received.count(b"HTTP/1.1 ") == 1  # no 408 after the answer: the connection is just closed
    assert outcome.closed_after_s >= BODY_TIMEOUT_S - 0.1


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    """What the server writes until `marker` arrives, it closes, or GIVE_UP_S passes."""
    until = time.monotonic() + GIVE_UP_S
    received = bytearray()
    while marker not in received and select.select([sock], [], [], max(0.0, until - time.monotonic()))[0]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received.extend(chunk)
    return bytes(received)


def test_a_kept_alive_connection_may_idle_between_requests(serve: ServeProcess) -> None:
    answers = []
    with connect(serve) as sock:
        for _ in range(2):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answers.append(read_until(sock, b'{"status":"ok"}'))
            time.sleep(HEADER_TIMEOUT_S + BODY_TIMEOUT_S)  # idle for longer than either deadline
    assert [answer[:12] for answer in answers] == [b"HTTP/1.1 200"] * 2, answers


async def test_a_stream_longer_than_both_deadlines_is_not_cut(serve: ServeProcess, scripted_llm: ScriptedLLM) -> None:
    tokens = [f"t{i} " for i in range(25)]
    scripted_llm.script(Reply(tokens=tokens, delay_s=0.15))  # about 4 s of answer
    body = {"session_id": "slow-stream", "message": "Tell me a long story.", "kb_prefix": "general"}
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as http:
        capture = await read_stream(http, "/api/v1/chat/stream", body)
    assert time.monotonic() - started > HEADER_TIMEOUT_S + BODY_TIMEOUT_S  # it did outlast both deadlines
    assert capture.statuses[-1] == "done", capture.statuses
    assert capture.text == "".join(tokens)
