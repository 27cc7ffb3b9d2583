"""A scripted OpenAI-compatible model server for tests and benchmarks.

Real HTTP/1.1 and real SSE on 127.0.0.1 (a free port by default), served by raw asyncio on its own
event loop in a background thread, so the real client code path (openai SDK, langchain-openai, httpx)
runs against it. It writes thousands of tokens per second with `delay_s=0`.

Usage::

    with ScriptedLLM() as llm:                      # or the `scripted_llm` pytest fixture
        llm.script(Reply(tokens=["Hel", "lo"]), Reply(status=500, error_message="boom"))
        client = AsyncOpenAI(base_url=llm.base_url, api_key="k")   # base_url = "http://127.0.0.1:PORT/v1"
        ...
        llm.requests[0]["messages"]                 # JSON bodies of /chat/completions calls, in order
        llm.token_sent_at[0]                        # perf_counter() after each content token was written

Endpoints (with or without the `/v1` prefix):

- `POST /v1/chat/completions`: the next scripted `Reply` (FIFO, see `script`), else `responder(body)`
  when set, else `default`. Streaming (`"stream": true`) sends OpenAI's exact frames: a role-only first
  chunk, reasoning deltas (`delta.reasoning_content`), one chunk per content token, a final chunk with
  `finish_reason`, a usage chunk with empty `choices` when `stream_options.include_usage` is set, then
  `data: [DONE]`; chunked transfer encoding, keep-alive. Non-streaming returns a `chat.completion` object.
  A non-200 `status` returns an OpenAI-shaped error body `{"error": {"message", "type", "param", "code"}}`.
- `GET /v1/models`: the configured model ids.
- `POST /v1/embeddings`: deterministic hashed bag-of-words vectors (`embed_text`), L2-normalised, so
  texts sharing words are similar; `dimensions` in the request overrides `embedding_dim`; supports
  `encoding_format` "float" and "base64" (the openai SDK's default).

Failure scripting counts content tokens already sent ("after N tokens"); N may equal `len(tokens)`:
`drop_after` closes the TCP connection in the middle of the chunked body (the client sees an incomplete
body), `stall_after` sends nothing for `stall_s` and then resumes (or ends when the client leaves),
`stream_error_after` sends an in-stream `{"error": ...}` object and `[DONE]`, `malformed_after` sends one
`data:` line that is not JSON, `end_after` ends the body cleanly without a finish chunk or `[DONE]`.
Non-streaming: `drop_after` closes without a response, `stall_after` delays the response by `stall_s`.

Every chat exchange records its path, headers, body, token timestamps and an `outcome`: "pending",
"completed", "disconnected" (the client went away first) or "dropped" (scripted). `wait_outcome` waits
for it.

Benchmarks run it in a separate process::

    python -m tests.support.scripted_llm --port 0 --tokens 5000     # prints "READY <base_url>"
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import itertools
import math
import re
import signal
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any

import orjson

__all__ = ["Exchange", "Reply", "ScriptedLLM", "embed_text"]

DEFAULT_MODEL = "scripted-model"


@dataclass
class Reply:
    """What the server answers to one /chat/completions call."""

    tokens: list[str] = field(default_factory=lambda: ["Hello", " world", "!"])  # one SSE chunk each
    reasoning: list[str] = field(default_factory=list)  # delta.reasoning_content, before the content
    delay_s: float = 0.0  # before each token (non-streaming: delay_s * len(tokens) before the body)
    status: int = 200
    error_message: str = ""  # non-200 body message; also the text of `stream_error_after`
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers, e.g. retry-after-ms
    drop_after: int | None = None
    stall_after: int | None = None
    stall_s: float = 60.0
    stream_error_after: int | None = None
    malformed_after: int | None = None
    end_after: int | None = None
    usage: dict[str, Any] | None = None  # default: computed from the request and the tokens
    content: str | None = None  # non-streaming answer; default "".join(tokens)
    finish_reason: str = "stop"


@dataclass
class Exchange:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    token_sent_at: list[float] = field(default_factory=list)
    outcome: str = "pending"
    client_port: int = 0  # the TCP connection it came on (kept-alive connections carry several)


class _ClientGone(Exception):
    """The client closed the connection while we were responding."""


class ScriptedLLM:
    """The server. A context manager; see the module docstring."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: tuple[str, ...] = (DEFAULT_MODEL,),
        embedding_dim: int = 64,
        default: Reply | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.models = models
        self.embedding_dim = embedding_dim
        self.default = default or Reply()
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._queue: deque[Reply] = deque()
        self._exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # -- public API -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next /chat/completions calls, first in first out."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget the queue, the recorded exchanges, the responder and the default reply."""
        with self._lock:
            self._queue.clear()
            self._exchanges = []
        self.responder = None
        self.default = Reply()

    @property
    def exchanges(self) -> list[Exchange]:
        """Every request received (chat, embeddings, models), in order."""
        return list(self._exchanges)

    @property
    def chat_exchanges(self) -> list[Exchange]:
        return [e for e in self._exchanges if e.path.endswith("/chat/completions")]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """JSON bodies of the /chat/completions calls, in order."""
        return [e.body for e in self.chat_exchanges]

    @property
    def token_sent_at(self) -> list[list[float]]:
        """Per chat call, `time.perf_counter()` right after each content token chunk was written."""
        return [e.token_sent_at for e in self.chat_exchanges]

    async def wait_outcome(self, index: int, within_s: float = 5.0) -> str:
        """Wait until chat call `index` is finished on the server side; returns its outcome."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            chats = self.chat_exchanges
            if index < len(chats) and chats[index].outcome != "pending":
                return chats[index].outcome
            await asyncio.sleep(0.005)
        raise TimeoutError(f"chat call {index} still pending after {within_s} s")

    def start(self) -> ScriptedLLM:
        self._thread = threading.Thread(target=self._run, name="scripted-llm", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted LLM server did not start")
        if self._startup_error is not None:
            raise RuntimeError("scripted LLM server failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- server plumbing ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start() when it happens before ready
            self._startup_error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await self._loop.create_server(
            lambda: asyncio.StreamReaderProtocol(_Reader(), self._accept), self.host, self.port
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await server.wait_closed()

    async def _accept(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reader = stream
        assert isinstance(reader, _Reader)  # _serve builds every connection with one
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, _ClientGone):
            pass  # the client went away; nothing to answer
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve_one(self, reader: _Reader, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; False when the connection must close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # clean close between requests
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        path = target.split("?", 1)[0]
        keep_alive = headers.get("connection", "").lower() != "close"
        return await self._route(method, path, headers, raw, reader, writer) and keep_alive

    async def _route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        reader: _Reader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            await _send_json(writer, 400, _error_body(400, "request body is not valid JSON"))
            return True
        exchange = Exchange(method, path, headers, body if isinstance(body, dict) else {"_": body})
        exchange.client_port = writer.get_extra_info("peername")[1]
        with self._lock:
            self._exchanges.append(exchange)
        if method == "POST" and path.endswith("/chat/completions"):
            return await self._chat(exchange, reader, writer)
        exchange.outcome = "completed"
        if method == "GET" and path.endswith("/models"):
            await _send_json(writer, 200, self._models_body())
        elif method == "POST" and path.endswith("/embeddings"):
            status, payload = self._embeddings(exchange.body)
            await _send_json(writer, status, payload)
        else:
            await _send_json(writer, 404, _error_body(404, f"no route for {method} {path}"))
        return True

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return self.default

    # -- /chat/completions --------------------------------------------------------------------------

    async def _chat(self, exchange: Exchange, reader: _Reader, writer: asyncio.StreamWriter) -> bool:
        reply = self._next_reply(exchange.body)
        gone = reader.closed
        try:
            if reply.status != 200:
                message = reply.error_message or HTTPStatus(reply.status).phrase
                await _send_json(writer, reply.status, _error_body(reply.status, message), reply.headers)
                exchange.outcome = "completed"
                return True
            if exchange.body.get("stream"):
                return await _Streamer(self, exchange, reply, writer, gone).run()
            return await self._complete(exchange, reply, writer, gone)
        except _ClientGone:
            exchange.outcome = "disconnected"
            return False

    async def _complete(
        self, exchange: Exchange, reply: Reply, writer: asyncio.StreamWriter, gone: asyncio.Event
    ) -> bool:
        if reply.drop_after is not None:
            exchange.outcome = "dropped"
            return False
        if reply.stall_after is not None:
            await _pause(reply.stall_s, gone)
        if reply.delay_s:
            await _pause(reply.delay_s * len(reply.tokens), gone)
        message: dict[str, Any] = {"role": "assistant", "content": _content_of(reply)}
        if reply.reasoning:
            message["reasoning_content"] = "".join(reply.reasoning)
        payload = {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": exchange.body.get("model") or self.models[0],
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
            "usage": _usage(exchange.body, reply),
        }
        await _send_json(writer, 200, payload, reply.headers)
        exchange.outcome = "completed"
        return True

    # -- /models and /embeddings --------------------------------------------------------------------

    def _models_body(self) -> dict[str, Any]:
        data = [{"id": model, "object": "model", "created": 0, "owned_by": "scripted"} for model in self.models]
        return {"object": "list", "data": data}

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        texts = _embedding_inputs(body.get("input"))
        if texts is None:
            return 400, _error_body(400, "'input' must be a string, a list of strings or token ids")
        dim = body.get("dimensions") or self.embedding_dim
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, dim)
            encoded: Any = _base64_floats(vector) if as_base64 else vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(text.split()) for text in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body.get("model") or "", "usage": usage}


class _Streamer:
    """Writes one scripted SSE answer."""

    def __init__(
        self,
        server: ScriptedLLM,
        exchange: Exchange,
        reply: Reply,
        writer: asyncio.StreamWriter,
        gone: asyncio.Event,
    ) -> None:
        self.exchange, self.reply, self.writer, self.gone = exchange, reply, writer, gone
        body = exchange.body
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        envelope = {
            "id": f"chatcmpl-scripted-{next(server._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model") or server.models[0],
        }
        # Frames are `prefix + delta JSON + suffix`: built once, so the token loop only dumps the delta.
        self.prefix = b"data: " + orjson.dumps(envelope)[:-1] + b',"choices":[{"index":0,"delta":'
        usage_null = b',"usage":null' if self.include_usage else b""
        self.suffix = b',"logprobs":null,"finish_reason":null}]' + usage_null + b"}\n\n"
        self.envelope = envelope

    async def run(self) -> bool:
        reply = self.reply
        extra = "".join(f"{name}: {value}\r\n" for name, value in reply.headers.items())
        self.writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n" + extra.encode("latin-1") + b"\r\n"
        )
        await self._send(self._frame({"role": "assistant", "content": ""}))
        for piece in reply.reasoning:
            await self._pause_before_token()
            await self._send(self._frame({"reasoning_content": piece}))
        for index in range(len(reply.tokens) + 1):
            if not await self._scripted_event(index):
                return self.exchange.outcome == "completed"
            if index == len(reply.tokens):
                break
            await self._pause_before_token()
            await self._send(self._frame({"content": reply.tokens[index]}))
            self.exchange.token_sent_at.append(time.perf_counter())
        await self._finish()
        return True

    async def _scripted_event(self, sent: int) -> bool:
        """Apply the failure scripted after `sent` tokens; False when the answer ends here."""
        reply = self.reply
        if reply.drop_after == sent:
            await self.writer.drain()
            self.exchange.outcome = "dropped"
            return False  # the connection closes without the chunked terminator
        if reply.stall_after == sent:
            await self.writer.drain()
            await _pause(reply.stall_s, self.gone)
        if reply.stream_error_after == sent:
            message = reply.error_message or "scripted stream error"
            error = {"message": message, "type": "server_error", "param": None, "code": None}
            await self._send(b"data: " + orjson.dumps({"error": error}) + b"\n\n")
            await self._end(b"data: [DONE]\n\n")
            return False
        if reply.malformed_after == sent:
            await self._send(b'data: {"choices": [{"delta": {"content": "unterminated\n\n')
        if reply.end_after == sent:
            await self._end(b"")
            return False
        return True

    async def _finish(self) -> None:
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": self.reply.finish_reason}
        last: dict[str, Any] = dict(self.envelope, choices=[choice])
        if self.include_usage:
            last["usage"] = None
        await self._send(b"data: " + orjson.dumps(last) + b"\n\n")
        if self.include_usage:
            usage_chunk: dict[str, Any] = dict(self.envelope, choices=[], usage=_usage(self.exchange.body, self.reply))
            await self._send(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        await self._end(b"data: [DONE]\n\n")

    async def _end(self, last: bytes) -> None:
        if last:
            await self._send(last)
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        self.exchange.outcome = "completed"

    def _frame(self, delta: dict[str, str]) -> bytes:
        return self.prefix + orjson.dumps(delta) + self.suffix

    async def _pause_before_token(self) -> None:
        if self.reply.delay_s:
            await _pause(self.reply.delay_s, self.gone)
        elif self.gone.is_set():
            raise _ClientGone

    async def _send(self, data: bytes) -> None:
        if self.gone.is_set():
            raise _ClientGone
        self.writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        try:
            await self.writer.drain()
        except ConnectionError as exc:
            raise _ClientGone from exc


# -- helpers ------------------------------------------------------------------------------------------


class _Reader(asyncio.StreamReader):
    """A StreamReader that announces the end of the connection without anyone reading from it.

    That lets a response in progress notice a departed client (to stop a stall or a delay at once)
    without consuming the bytes of the client's next request.
    """

    def __init__(self) -> None:
        super().__init__(limit=1 << 20)
        self.closed = asyncio.Event()

    def feed_eof(self) -> None:
        super().feed_eof()
        self.closed.set()

    def set_exception(self, exc: Exception) -> None:
        super().set_exception(exc)
        self.closed.set()


async def _pause(seconds: float, gone: asyncio.Event) -> None:
    """Sleep, but end at once (raising _ClientGone) when the client disconnects."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone.wait(), seconds)
    if gone.is_set():
        raise _ClientGone


async def _send_json(
    writer: asyncio.StreamWriter, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    data = orjson.dumps(payload)
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"HTTP/1.1 {status} {_reason(status)}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\n{extra}\r\n"
    )
    writer.write(head.encode("latin-1") + data)
    await writer.drain()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    code = {401: "invalid_api_key", 404: "not_found", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _content_of(reply: Reply) -> str:
    return reply.content if reply.content is not None else "".join(reply.tokens)


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    if reply.usage is not None:
        return reply.usage
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
    completion = len(reply.tokens) + len(reply.reasoning)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": len(reply.reasoning)}
    return usage


def _embedding_inputs(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return [" ".join(map(str, value))]  # one input given as token ids
    if isinstance(value, list) and all(isinstance(v, str | list) for v in value):
        return [v if isinstance(v, str) else " ".join(map(str, v)) for v in value]
    return None


_WORDS = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _features(text: str) -> list[str]:
    features: list[str] = []
    for word in _WORDS.findall(text.lower()):
        features.extend(list(word) if _CJK.search(word) else [word])
    return features or [text]


def embed_text(text: str, dim: int = 64) -> list[float]:
    """The server's embedding: a signed hashed bag of words (CJK per character), L2-normalised."""
    vector = [0.0] * dim
    for feature in _features(text):
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        vector[digest % dim] += 1.0 if (digest >> 40) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _base64_floats(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


# -- command line (benchmarks run the server in a separate process) -------------------------------------

_SAMPLE_WORDS = (
    "The",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "graphs",
    "answer",
)


def benchmark_tokens(count: int) -> list[str]:
    """`count` short word-like tokens (" quick", " brown", ...), like a real model's."""
    return [f" {_SAMPLE_WORDS[i % len(_SAMPLE_WORDS)]}" for i in range(count)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the scripted OpenAI-compatible model server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--tokens", type=int, default=5000, help="content tokens per streamed answer")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each token")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    default = Reply(tokens=benchmark_tokens(args.tokens), delay_s=args.delay)
    with ScriptedLLM(host=args.host, port=args.port, default=default) as llm:
        print(f"READY {llm.base_url}", flush=True)
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
