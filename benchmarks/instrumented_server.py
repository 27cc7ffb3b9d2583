"""Benchmark-only launcher: runs our server or the bare pass-through under uvicorn, optionally instrumented.

    python -m benchmarks.instrumented_server --app ours [--instrument] [--profile out.prof]
    python -m benchmarks.instrumented_server --app passthrough --upstream http://127.0.0.1:PORT/v1 [--instrument]

Prints `READY http://127.0.0.1:PORT` once uvicorn has started (lifespan done). Our server is
`backend.main.build_app(Settings())`, configured by environment variables as in production; uvicorn
runs with the product's options (`log_config=None`, default access log). Nothing here changes the product.

With `--instrument` (SPEC §5 "Token hot path" measurements):

- the model-parsing step is wrapped to stamp `time.perf_counter_ns()` when a content delta leaves it:
  ours: `OpenAICompatibleChatModel._parse_chunk` (it runs right before `stream()` yields the delta);
  pass-through: `passthrough_app.parse_delta`. The call that opens the upstream request is stamped too
  (`OpenAICompatibleChatModel.stream` / `passthrough_app.upstream_body`), without adding a generator layer;
- a pure-ASGI middleware, outermost, stamps each token frame (`data: {"status":"token"...`) as it is
  handed to uvicorn's `send`, and pairs it with the oldest unpaired delta stamp (one delta = one frame,
  in order: SPEC's strict true streaming). Added latency per token = send stamp − delta stamp;
- per request it records: arrived (ASGI call), response_start, model_call, first_delta, first_token_sent,
  and for ours also the start and end of `TurnService.prepare` (validation, user message stored, history
  read) and of `RouterGraph.route`;
- `GET /__bench/take` returns and clears everything recorded (JSON); it is answered by the middleware
  and never reaches the app. The stamps assume one request in flight at a time (the benchmark is sequential).

With `--profile PATH` the process runs under cProfile and writes PATH when it is stopped (SIGTERM/SIGINT).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Any

import orjson
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_FRAME_PREFIX = b'data: {"status":"token"'
BENCH_PATH = "/__bench/take"


class Probe:
    """Stamps of one benchmark process; one request in flight at a time."""

    def __init__(self) -> None:
        self.pending: deque[int] = deque()  # delta stamps waiting for their frame
        self.added_ns: list[int] = []  # per token frame: send stamp - delta stamp
        self.unpaired_frames = 0
        self.requests: list[dict[str, int]] = []
        self.current: dict[str, int] = {}

    def delta(self) -> None:
        now = time.perf_counter_ns()
        self.pending.append(now)
        if "first_delta" not in self.current:
            self.current["first_delta"] = now

    def model_call(self) -> None:
        self.mark("model_call")

    def mark(self, name: str) -> None:
        """The first time `name` happens in the current request."""
        self.current.setdefault(name, time.perf_counter_ns())

    def take(self) -> dict[str, Any]:
        taken = {
            "added_ns": self.added_ns,
            "requests": self.requests,
            "unpaired_frames": self.unpaired_frames,
            "unpaired_deltas": len(self.pending),
        }
        self.added_ns, self.requests, self.unpaired_frames = [], [], 0
        self.pending.clear()
        return taken


class ProbeMiddleware:
    """Outermost ASGI middleware: stamps token frames at `send`, serves `GET /__bench/take`."""

    def __init__(self, app: ASGIApp, probe: Probe) -> None:
        self.app = app
        self.probe = probe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == BENCH_PATH:
            await _send_json(send, self.probe.take())
            return
        probe = self.probe
        record = {"arrived": time.perf_counter_ns(), "tokens": 0}
        probe.current = record
        # Listed now, not when the app returns: the client may ask for it before the app's teardown ends.
        probe.requests.append(record)
        pending, added = probe.pending, probe.added_ns

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("body", b"").startswith(TOKEN_FRAME_PREFIX):
                    now = time.perf_counter_ns()
                    if pending:
                        added.append(now - pending.popleft())
                    else:
                        probe.unpaired_frames += 1
                    if not record["tokens"]:
                        record["first_token_sent"] = now
                    record["tokens"] += 1
            elif message["type"] == "http.response.start":
                record["response_start"] = time.perf_counter_ns()
            await send(message)

        await self.app(scope, receive, timed_send)


async def _send_json(send: Send, payload: dict[str, Any]) -> None:
    body = orjson.dumps(payload)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _instrument_ours(probe: Probe) -> None:
    from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel

    parse = OpenAICompatibleChatModel._parse_chunk
    stream = OpenAICompatibleChatModel.stream

    def stamped_parse(self: OpenAICompatibleChatModel, payload: str) -> Any:
        result = parse(self, payload)
        if result[0] is not None and result[0].content:
            probe.delta()
        return result

    def stamped_stream(self: OpenAICompatibleChatModel, messages: Sequence[Any]) -> Any:
        probe.model_call()
        return stream(self, messages)  # the same generator object: no extra layer per token

    OpenAICompatibleChatModel._parse_chunk = stamped_parse  # type: ignore[method-assign]
    OpenAICompatibleChatModel.stream = stamped_stream  # type: ignore[method-assign]

    # Once per request (not per token): where the time to the first token goes.
    from backend.application.chat.turns import TurnService
    from backend.infrastructure.routing.router_graph import RouterGraph

    TurnService.prepare = _bracketed(TurnService.prepare, probe, "prepare")  # type: ignore[method-assign,assignment]
    RouterGraph.route = _bracketed(RouterGraph.route, probe, "route")  # type: ignore[method-assign,assignment]


def _bracketed(method: Callable[..., Awaitable[Any]], probe: Probe, name: str) -> Callable[..., Awaitable[Any]]:
    """`method` (a coroutine function) stamping `<name>_start` and `<name>_end` in the current request."""

    async def bracketed(*args: Any, **kwargs: Any) -> Any:
        probe.mark(f"{name}_start")
        try:
            return await method(*args, **kwargs)
        finally:
            probe.mark(f"{name}_end")

    return bracketed


def _instrument_passthrough(probe: Probe) -> None:
    from benchmarks import passthrough_app

    parse = passthrough_app.parse_delta
    body = passthrough_app.upstream_body

    def stamped_parse(payload: str) -> str:
        content = parse(payload)
        if content:
            probe.delta()
        return content

    def stamped_body(model: str, message: str) -> dict[str, Any]:
        probe.model_call()
        return body(model, message)

    passthrough_app.parse_delta = stamped_parse
    passthrough_app.upstream_body = stamped_body


def build(app_name: str, upstream: str | None, model: str, instrument: bool) -> ASGIApp:
    probe = Probe()
    app: ASGIApp
    if app_name == "ours":
        if instrument:
            _instrument_ours(probe)  # before the app (and its adapter) is built
        from backend.main import build_app

        app = build_app()
    else:
        if upstream is None:
            raise SystemExit("--upstream is required for --app passthrough")
        if instrument:
            _instrument_passthrough(probe)
        from benchmarks.passthrough_app import build_passthrough_app

        app = build_passthrough_app(upstream, model)
    return ProbeMiddleware(app, probe) if instrument else app


async def serve(app: ASGIApp, host: str) -> None:
    # The product's uvicorn options (backend/cli.py): log_config=None, default access log, asyncio + h11.
    # uvicorn binds the port itself, as in production: a socket made here with proto 0 would make asyncio
    # skip TCP_NODELAY on the accepted connections (Nagle + delayed ACK = 40 ms stalls).
    from backend.infrastructure.config.settings import ServerEnv

    keep_alive = ServerEnv().http_keep_alive_s  # read from the environment, as `serve` does
    config = uvicorn.Config(
        app, host=host, port=0, log_config=None, timeout_graceful_shutdown=10, timeout_keep_alive=keep_alive
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            raise SystemExit("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"READY http://{host}:{port}", flush=True)
    await task


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--app", choices=("ours", "passthrough"), required=True)
    parser.add_argument("--upstream", help="the model's base URL (pass-through only; ours reads LLM_BASE_URL)")
    parser.add_argument("--model", default="scripted-model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--instrument", action="store_true")
    parser.add_argument("--profile", help="write a cProfile of the whole process to this path at exit")
    args = parser.parse_args(argv)
    app = build(args.app, args.upstream, args.model, args.instrument)
    run: Callable[[], None] = lambda: asyncio.run(serve(app, args.host))  # noqa: E731
    if not args.profile:
        run()
        return
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default handler that would
    # kill the process before the profile is written.
    signal.signal(signal.SIGTERM, _exit_quietly)
    profiler = cProfile.Profile()
    try:
        profiler.runcall(run)
    finally:
        profiler.dump_stats(args.profile)
        print(f"profile written to {args.profile}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
