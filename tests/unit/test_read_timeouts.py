"""The read-deadline protocol driven directly, on an in-memory transport: the cases a live client cannot time
well (a pipelined request cut in the middle of its head, a stream long after its request was read)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from backend.server.read_timeouts import ReadTimeoutProtocol, read_timeout_protocol

DEADLINE_S = 0.05


class MemoryTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = asyncio.Event()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.extend(data)

    def close(self) -> None:
        self.closed.set()

    def is_closing(self) -> bool:
        return self.closed.is_set()

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def streaming_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, then streams for many times the deadlines."""
    while (await receive()).get("more_body", False):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    for index in range(10):
        await asyncio.sleep(DEADLINE_S / 2)
        await send({"type": "http.response.body", "body": f"{index};".encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@dataclass
class Connection:
    protocol: ReadTimeoutProtocol
    transport: MemoryTransport
    server: ServerState

    async def closed(self) -> None:
        await asyncio.wait_for(self.transport.closed.wait(), 5)

    async def apps_done(self) -> None:
        await asyncio.wait_for(asyncio.gather(*self.server.tasks), 5)


def connect() -> Connection:
    config = uvicorn.Config(streaming_app, log_config=None, lifespan="off")
    config.load()
    server = ServerState()
    protocol = read_timeout_protocol(DEADLINE_S, DEADLINE_S)(config=config, server_state=server, app_state={})
    transport = MemoryTransport()
    protocol.connection_made(transport)
    return Connection(protocol, transport, server)


def responses(written: bytes) -> list[tuple[int, bytes]]:
    """The (status, body) of each whole response in `written`, read by h11 as a client would."""
    client = h11.Connection(h11.CLIENT)
    client.receive_data(written)
    found: list[tuple[int, bytes]] = []
    while client.trailing_data[0]:
        client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        client.send(h11.EndOfMessage())
        status, body = 0, b""
        while not isinstance(event := client.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                return found
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
        found.append((status, body))
        if client.their_state is not h11.DONE:
            break  # the server said it closes
        client.start_next_cycle()
    return found


async def test_a_stream_that_outlasts_both_deadlines_is_not_cut() -> None:
    connection = connect()
    connection.protocol.data_received(b"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    started = time.monotonic()
    await connection.apps_done()
    assert time.monotonic() - started > 2 * DEADLINE_S
    assert not connection.transport.closed.is_set()
    assert responses(bytes(connection.transport.written)) == [(200, b"".join(f"{i};".encode() for i in range(10)))]


async def test_a_pipelined_request_cut_in_its_head_gets_the_head_deadline_after_the_first_answer() -> None:
    connection = connect()
    connection.protocol.data_received(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HT")
    await connection.closed()
    (first_status, _), (status, body) = responses(bytes(connection.transport.written))
    assert first_status == 200
    assert status == 408
    assert json.loads(body)["error"]["code"] == "request_timeout"


async def test_a_body_cut_off_is_answered_408_in_the_shape_of_its_path() -> None:
    connection = connect()
    connection.protocol.data_received(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
    await connection.closed()
    connection.protocol.connection_lost(None)  # what the event loop reports once the socket is closed
    await connection.apps_done()  # the app, told of the disconnect, ends and writes nothing after the 408
    [(status, body)] = responses(bytes(connection.transport.written))
    assert status == 408
    error = json.loads(body)["error"]
    assert error["code"] == "request_timeout" and error["type"] == "invalid_request_error"


async def test_a_head_that_outgrows_the_parser_in_pieces_gets_a_431_in_the_apis_shape() -> None:
    connection = connect()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Session-ID: " + b"A" * 100_000 + b"\r\n\r\n"
    for start in range(0, len(head), 8192):  # the pieces a socket may hand over one read at a time
        if connection.transport.is_closing():
            break
        connection.protocol.data_received(head[start : start + 8192])
    await connection.closed()
    [(status, body)] = responses(bytes(connection.transport.written))
    assert status == 431 and connection.transport.written.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    assert json.loads(body)["error"]["code"] == "request_header_too_large"


async def test_a_request_that_is_not_http_gets_a_400_in_the_apis_shape() -> None:
    connection = connect()
    connection.protocol.data_received(b"HELLO THERE\r\n\r\n")
    await connection.closed()
    [(status, body)] = responses(bytes(connection.transport.written))
    assert status == 400
    assert json.loads(body)["error"]["code"] == "invalid_http_request"
