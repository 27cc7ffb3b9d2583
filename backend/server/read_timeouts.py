"""Deadlines for reading a request: a client that trickles its head or its body is cut off, not held forever.

uvicorn waits for a request's bytes without any limit (its keep-alive timeout only covers the silence between
requests, and a single byte cancels it), so one client sending a byte every few seconds holds a connection
for as long as it likes, and enough of them hold every connection the server can keep (slowloris). This
protocol is uvicorn's h11 protocol with two deadlines, each for a whole part of the request, not for the
silence between bytes:

- the head (request line and headers) must arrive within `head_timeout_s` of the connection's opening or,
  on a kept-alive connection, of the next request's first byte;
- the body within `body_timeout_s` of the head, whether or not the app reads it (a client that got an
  early 401 must not trickle the rest of a large body either).

When a deadline passes, a client that has sent part of the request and has no response yet gets a 408 in
its API's error shape; then the connection is closed. Responses are never cut: once the request is read,
no deadline runs, so streams (SSE) last as long as they need.

A request h11 cannot parse gets the API's error shape too, not uvicorn's plain-text 400: a 431 when its head
outgrows h11's buffer before it ends (whether that is seen depends on how the bytes arrive, so a client must
get the same clear answer either way), a 400 otherwise.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from http import HTTPStatus
from typing import ClassVar

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE  # uvicorn's default too
from uvicorn.protocols.http.h11_impl import H11Protocol

from backend.server.errors import error_response

logger = logging.getLogger(__name__)


class _Part(enum.Enum):
    HEAD = "head"
    BODY = "body"


class ReadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines for the request head and body; see `read_timeout_protocol`."""

    head_timeout_s: ClassVar[float]
    body_timeout_s: ClassVar[float]
    _reading: _Part | None = None  # the part of a request being waited for under a deadline
    _deadline: asyncio.TimerHandle | None = None
    _upgraded = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._read(_Part.HEAD)  # a new connection must send its first request in time, even its first byte

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._reading is None:
            self._read(_Part.HEAD)  # the first byte of the next request on a kept-alive connection
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow_request()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._upgraded = True
        self._read(None)
        super().handle_websocket_upgrade(event)

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this when h11 refuses the request; `msg` is uvicorn's plain-text reason."""
        limit = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        if len(self.conn.trailing_data[0]) > limit:
            status, code, message = 431, "request_header_too_large", f"the request head is over {limit} bytes"
        else:
            status, code, message = 400, "invalid_http_request", "the request is not valid HTTP/1.1"
        response = error_response("", status, code, message, headers={"Connection": "close"})
        for event in (
            h11.Response(status_code=status, headers=response.raw_headers, reason=HTTPStatus(status).phrase),
            h11.Data(data=bytes(response.body)),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._read(None)
        super().connection_lost(exc)

    def _follow_request(self) -> None:
        """Start or stop the deadline for what the client is sending now."""
        if self._upgraded:
            return  # a WebSocket now: its protocol has the connection
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._read(_Part.BODY)
        elif state is h11.IDLE:
            if self._reading is not _Part.HEAD:
                # A pipelined request may already have begun; between requests the keep-alive timeout applies.
                self._read(_Part.HEAD if self.conn.trailing_data[0] else None)
        else:
            self._read(None)

    def _read(self, part: _Part | None) -> None:
        if part is self._reading:
            return  # a deadline runs from the part's start, however many bytes arrive meanwhile
        if self._deadline is not None:
            self._deadline.cancel()
        self._reading = part
        self._deadline = None
        if part is not None:
            timeout_s = self.head_timeout_s if part is _Part.HEAD else self.body_timeout_s
            self._deadline = self.loop.call_later(timeout_s, self._expired, part, timeout_s)

    def _expired(self, part: _Part, timeout_s: float) -> None:
        self._reading = None
        self._deadline = None
        if self.transport.is_closing():
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "an unknown client"
        logger.info("closing the connection of %s: the request %s took over %g s", client, part.value, timeout_s)
        if part is _Part.HEAD and self.conn.trailing_data[0]:
            self.transport.write(_timeout_response("", f"the request head did not arrive within {timeout_s:g} s"))
        elif part is _Part.BODY and not self.cycle.response_started:
            self.cycle.disconnected = True  # the app sends nothing more on this connection
            message = f"the request body did not arrive within {timeout_s:g} s"
            self.transport.write(_timeout_response(self.scope["path"], message))
        self.transport.close()


def _timeout_response(path: str, message: str) -> bytes:
    """A whole 408 response, written as bytes: before a request head is parsed there is no request to answer."""
    response = error_response(path, 408, "request_timeout", message, headers={"Connection": "close"})
    head = b"HTTP/1.1 408 Request Timeout\r\n" + b"".join(
        name + b": " + value + b"\r\n" for name, value in response.raw_headers
    )
    return head + b"\r\n" + response.body


def read_timeout_protocol(head_timeout_s: float, body_timeout_s: float) -> type[ReadTimeoutProtocol]:
    """The protocol class to give `uvicorn.Config(http=...)`; it also pins the h11 parser (not httptools)."""

    class Protocol(ReadTimeoutProtocol):
        pass

    Protocol.head_timeout_s = head_timeout_s
    Protocol.body_timeout_s = body_timeout_s
    return Protocol
