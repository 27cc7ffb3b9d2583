"""200 concurrent SSE streams against the real server, next to the bare FastAPI pass-through.

Processes (started as in benchmarks/streaming_latency.py, with its helpers; the client is this process):

  model        benchmarks.scripted_model, 0 ms per token; `[tokens=N]` in the message sets the answer length
  ours         `backend.main.build_app(Settings())` under uvicorn with the product's options
               (benchmarks.instrumented_server --app ours, not instrumented): AUTH_MODE=none, an empty KB
               registry, requests with kb_prefix "general" (general chat: routing, no retrieval, the same
               stream executor with an empty plan), the model as LLM_BASE_URL. History in Postgres when a
               DSN is given (--dsn or POSTGRES_TEST_DSN), on a database `bench_concurrency` that this script
               creates and drops (benchmarks.history_store.scratch_database), with the product's pool
               (POSTGRES_POOL_MAX default, or --pool-max); else in SQLite in a temp DATA_DIR (also with
               --sqlite). The JSON says which, and whether the server's Postgres connections use TLS.
  passthrough  benchmarks.passthrough_app: one FastAPI endpoint that forwards each model delta as an SSE frame;
               no history, no routing, no event protocol

Load: a wave is S streams (default 200) opened at once on loopback, each a fresh session, through a fresh
httpx.AsyncClient allowing S connections (so every stream opens its own TCP connection, as S browsers
would), each read to its end. Waves alternate between the two servers (which goes first rotates), after a warm-up
of each server (3 sequential streams and one wave of 20) that is not counted.

Per stream, outcomes: ok, or an error of one kind: `http` (status != 200), `error_event` (an `error` frame),
`missing_done` (ours: the body ended without `done`), `timeout` (--timeout per stream), `transport`
(connection failed or broke), `protocol` (any other breach of docs/events.md, or tokens other than the model
sent; benchmarks.streaming_latency.check_stream). Goal: 0 errors.

Figures per server (all waves pooled unless said): errors by kind; TTFT p50/p95/p99, from just before the
stream's POST is sent to the first `token` frame received (client-side; the client's own work for the other
streams counts, equally for both servers); tokens/s = token frames received in a wave / the wave's wall
clock (median over waves); server CPU µs per token over a wave (/proc/<pid>/stat); server RSS (VmRSS from
/proc/<pid>/status) at start, after the warm-up, the peak per wave (benchmarks.graph_probes.RssSampler),
and 1 s after the last wave, plus VmHWM; this process's CPU per wave (the client costs about as much CPU
as a server, on the same cores). Ratios ours/pass-through of TTFT p99 and tokens/s; goal within 1.5x
(TTFT p99 ratio <= 1.5, tokens/s ratio >= 1/1.5). After the last wave, the number of user messages and of
completed answers stored by ours is checked against the number of streams sent to it (warm-up included),
and the warnings and errors in each server's log are counted.

The pass-through's upstream client is httpx's default (at most 100 connections to the model), ours is the
openai SDK's (1000): with more than 100 streams the pass-through queues some model calls itself.

Run:  python -m benchmarks.concurrency [--quick] [--streams 200 --waves 3 --tokens 64]
Writes benchmarks/results/concurrency.json (`--quick`:
concurrency_quick.json) and prints a table. Exit status 0 even when a goal is missed or
streams fail (the counts are in the table and the JSON). The machine is shared: compare ours with the
pass-through of the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from backend.infrastructure.config.settings import ConversationStoreEnv
from backend.infrastructure.persistence.postgres.database import describe_dsn
from benchmarks.goals import GOAL_RATIO
from benchmarks.graph_probes import (
    RssSampler,
    cpu_seconds,
    machine,
    percentile,
    ratio,
    result_path,
    save_result,
    status_kib,
)
from benchmarks.history_store import scratch_database, tls_in_use
from benchmarks.streaming_latency import (
    API_KEY,
    MODEL,
    TOKEN_MARK,
    ProtocolViolation,
    Server,
    _clean_env,
    _start,
    _stop,
    check_stream,
    parse_frames,
)

DATABASE = "bench_concurrency"
HISTORY_DB = "chat_history.db"  # backend.bootstrap.HISTORY_DB; not imported, that would load the whole app here
POOL_MAX_DEFAULT = int(ConversationStoreEnv.model_fields["postgres_pool_max"].default)
ERROR_KINDS = ("http", "error_event", "missing_done", "timeout", "transport", "protocol")

QUICK: dict[str, int] = {"streams": 50, "waves": 2, "tokens": 64}
FULL: dict[str, int] = {"streams": 200, "waves": 3, "tokens": 64}


# -- processes ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    """Where our server keeps history: a Postgres DSN, or its SQLite file."""

    dsn: str | None
    sqlite_path: Path

    def describe(self) -> str:
        return f"postgres ({describe_dsn(self.dsn)})" if self.dsn else "sqlite (a file in a temp DATA_DIR)"

    async def counts(self) -> dict[str, Any]:
        """Messages stored so far: user messages, and assistant answers stored as completed; for Postgres
        also whether the server's connections use TLS."""
        query = (
            "SELECT count(*) FILTER (WHERE role = 'user'), "
            "count(*) FILTER (WHERE role = 'assistant' AND completed) FROM messages"
        )
        if self.dsn:
            conn = await asyncpg.connect(self.dsn)
            try:
                row = await conn.fetchrow(query)
            finally:
                await conn.close()
        else:
            row = await asyncio.to_thread(
                _sqlite_row, self.sqlite_path, query.replace("AND completed", "AND completed = 1")
            )
        counts: dict[str, Any] = {"user_messages": int(row[0]), "completed_answers": int(row[1])}
        if self.dsn:
            counts["postgres_connections_tls"] = await tls_in_use(self.dsn)
        return counts


def _sqlite_row(path: Path, query: str) -> tuple[Any, ...]:
    with closing(sqlite3.connect(path)) as conn:
        row: tuple[Any, ...] = conn.execute(query).fetchone()
    return row


@asynccontextmanager
async def servers(dsn: str | None, tokens: int, pool_max: int | None) -> AsyncIterator[tuple[list[Server], History]]:
    """The model, ours and the pass-through (stopped on exit); and where ours stores history."""
    async with AsyncExitStack() as stack:
        bench_dsn = await stack.enter_async_context(scratch_database(dsn, DATABASE)) if dsn else None
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="concurrency-")))
        history = History(bench_dsn, work / "data" / HISTORY_DB)
        env = _clean_env()
        model_cmd = [sys.executable, "-m", "benchmarks.scripted_model", "--port", "0", "--tokens", str(tokens)]
        model, model_url = _start(model_cmd, env, work, work / "model.log")
        stack.callback(_stop, model)  # stops before the database is dropped (exit order is reversed)
        registry = work / "kb_registry.toml"
        registry.write_text("# no knowledge bases: general chat only\n")
        ours_env = dict(
            env,
            AUTH_MODE="none",
            DATA_DIR=str(work / "data"),
            KB_REGISTRY_PATH=str(registry),
            LLM_BASE_URL=model_url,
            LLM_MODEL=MODEL,
            LLM_API_KEY=API_KEY,
        )
        if bench_dsn:
            ours_env.update(CONVERSATION_STORE="postgres", POSTGRES_DSN=bench_dsn)
            if pool_max is not None:
                ours_env["POSTGRES_POOL_MAX"] = str(pool_max)
        else:
            ours_env.update(CONVERSATION_STORE="sqlite")
        launcher = [sys.executable, "-m", "benchmarks.instrumented_server", "--app"]
        started: list[Server] = []
        for kind, command, server_env in (
            ("ours", [*launcher, "ours"], ours_env),
            ("passthrough", [*launcher, "passthrough", "--upstream", model_url, "--model", MODEL], env),
        ):
            log = work / f"{kind}.log"
            process, url = _start(command, server_env, work, log)
            stack.callback(_stop, process)
            started.append(Server(kind, False, process, url, log))
        yield started, history


# -- one stream, one wave -------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # "ok" or one of ERROR_KINDS
    detail: str
    first_token_s: float | None
    tokens: int


async def one_stream(
    client: httpx.AsyncClient, server: Server, session_id: str, tokens: int, timeout_s: float
) -> Outcome:
    chunks: list[bytes] = []
    first: float | None = None
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", server.stream_url, json=server.body(session_id, tokens)) as response:
                if response.status_code != 200:
                    await response.aread()
                    return Outcome("http", f"HTTP {response.status_code}: {response.text[:200]}", None, 0)
                async for chunk in response.aiter_raw():
                    if first is None and TOKEN_MARK in chunk:
                        first = time.perf_counter() - started
                    chunks.append(chunk)
    except (TimeoutError, httpx.TimeoutException) as exc:
        return Outcome("timeout", f"{type(exc).__name__} after {time.perf_counter() - started:.1f} s", first, 0)
    except httpx.HTTPError as exc:
        return Outcome("transport", f"{type(exc).__name__}: {exc}", first, 0)
    return judge(server, b"".join(chunks), tokens, first)


def judge(server: Server, raw: bytes, tokens: int, first: float | None) -> Outcome:
    try:
        frames = parse_frames(raw, server.name)
    except (ProtocolViolation, ValueError) as exc:
        return Outcome("protocol", str(exc)[:300], first, 0)
    received = sum(1 for frame in frames if frame.get("status") == "token")
    statuses = [frame.get("status") for frame in frames]
    if "error" in statuses:
        error = next(frame for frame in frames if frame.get("status") == "error")
        return Outcome("error_event", str(error.get("message"))[:300], first, received)
    if server.kind == "ours" and "done" not in statuses:
        return Outcome("missing_done", f"{len(frames)} frames, last {statuses[-1:]}", first, received)
    try:
        check_stream(server, frames, tokens)
    except ProtocolViolation as exc:
        return Outcome("protocol", str(exc)[:300], first, received)
    return Outcome("ok", "", first, received)


@dataclass
class Wave:
    server: str
    streams: int
    wall_s: float
    cpu_s: float
    client_cpu_s: float
    outcomes: list[Outcome]
    rss_peak_kib: int = 0

    @property
    def tokens(self) -> int:
        return sum(o.tokens for o in self.outcomes)


async def run_wave(server: Server, streams: int, tokens: int, label: str, timeout_s: float) -> Wave:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout_s)) as client:
        cpu_before, started, client_before = cpu_seconds(server.pid), time.perf_counter(), time.process_time()
        outcomes = await asyncio.gather(
            *(one_stream(client, server, f"{label}-{i}", tokens, timeout_s) for i in range(streams))
        )
        wall, cpu = time.perf_counter() - started, cpu_seconds(server.pid) - cpu_before
        client_cpu = time.process_time() - client_before
    return Wave(server.name, streams, wall, cpu, client_cpu, list(outcomes))


@dataclass
class Run:
    waves: dict[str, list[Wave]]
    rss_kib: dict[str, dict[str, int]]
    logs: dict[str, dict[str, Any]]
    history: str
    streams_sent: int
    stored: dict[str, Any]


def log_lines(path: Path) -> dict[str, Any]:
    """Warnings and errors a server logged (an error the client cannot see, such as a failed save)."""
    lines = path.read_text(errors="replace").splitlines()
    errors = [line for line in lines if " ERROR " in line or line.startswith("Traceback")]
    warnings = [line for line in lines if " WARNING " in line]
    return {"errors": len(errors), "warnings": len(warnings), "samples": (errors + warnings)[:5]}


async def run(dsn: str | None, streams: int, waves: int, tokens: int, timeout_s: float, pool_max: int | None) -> Run:
    """Warm up, then `waves` waves per server; RSS, logs and what ours stored."""
    async with servers(dsn, tokens, pool_max) as (started, history):
        pids = {server.name: server.pid for server in started}
        rss: dict[str, dict[str, int]] = {name: {"start": status_kib(pid, "VmRSS")} for name, pid in pids.items()}
        sent = 0
        for server in started:
            for i in range(3):
                await run_wave(server, 1, tokens, f"warm-seq{i}", timeout_s)
            await run_wave(server, 20, tokens, "warm", timeout_s)
            sent += 23 if server.kind == "ours" else 0
            rss[server.name]["after_warm_up"] = status_kib(server.pid, "VmRSS")
        done: dict[str, list[Wave]] = {server.name: [] for server in started}
        with RssSampler(pids, interval_s=0.1) as sampler:
            for w in range(waves):
                order = started if w % 2 == 0 else started[::-1]
                for server in order:
                    sampler.window()
                    wave = await run_wave(server, streams, tokens, f"w{w}", timeout_s)
                    wave.rss_peak_kib = sampler.window()[server.name]
                    done[server.name].append(wave)
                    sent += streams if server.kind == "ours" else 0
                    failed = sum(o.kind != "ok" for o in wave.outcomes)
                    print(
                        f"  wave {w + 1}/{waves}  {server.name:<18} {wave.wall_s:6.2f} s  "
                        f"{wave.tokens / wave.wall_s:9.0f} tokens/s  errors {failed}",
                        flush=True,
                    )
        await asyncio.sleep(1.0)
        for server in started:
            rss[server.name]["after"] = status_kib(server.pid, "VmRSS")
            rss[server.name]["hwm"] = status_kib(server.pid, "VmHWM")
        stored = await history.counts()
        logs = {server.name: log_lines(server.log) for server in started}
    return Run(done, rss, logs, history.describe(), sent, stored)


# -- figures ---------------------------------------------------------------------------------------------------------


def summarize_server(waves: Sequence[Wave], rss: dict[str, int]) -> dict[str, Any]:
    outcomes = [o for wave in waves for o in wave.outcomes]
    kinds = Counter(o.kind for o in outcomes)
    ttft_ms = [o.first_token_s * 1000 for o in outcomes if o.kind == "ok" and o.first_token_s is not None]
    samples: dict[str, list[str]] = {}
    for o in outcomes:
        if o.kind != "ok" and len(samples.setdefault(o.kind, [])) < 3:
            samples[o.kind].append(o.detail)
    tokens = sum(wave.tokens for wave in waves)
    return {
        "streams": len(outcomes),
        "ok": kinds["ok"],
        "errors": sum(kinds[k] for k in ERROR_KINDS),
        "errors_by_kind": {k: kinds[k] for k in ERROR_KINDS},
        "error_samples": samples,
        "ttft_ms": {
            "p50": round(percentile(ttft_ms, 50), 2),
            "p95": round(percentile(ttft_ms, 95), 2),
            "p99": round(percentile(ttft_ms, 99), 2),
            "max": round(max(ttft_ms), 2) if ttft_ms else float("nan"),
        },
        "tokens_per_s": round(statistics.median(wave.tokens / wave.wall_s for wave in waves)),
        "tokens_per_s_waves": [round(wave.tokens / wave.wall_s) for wave in waves],
        "wave_wall_s": [round(wave.wall_s, 2) for wave in waves],
        "server_cpu_us_per_token": round(sum(w.cpu_s for w in waves) / tokens * 1e6, 1) if tokens else None,
        "server_cpu_s_waves": [round(wave.cpu_s, 2) for wave in waves],
        "client_cpu_s_waves": [round(wave.client_cpu_s, 2) for wave in waves],
        "rss_kib": {**rss, "peak_per_wave": [wave.rss_peak_kib for wave in waves]},
    }


def summarize(run: Run) -> dict[str, Any]:
    ours = summarize_server(run.waves["ours/plain"], run.rss_kib["ours/plain"])
    passthrough = summarize_server(run.waves["passthrough/plain"], run.rss_kib["passthrough/plain"])
    ours["log"], passthrough["log"] = run.logs["ours/plain"], run.logs["passthrough/plain"]
    ours["history"] = {"store": run.history, "streams_sent": run.streams_sent, **run.stored}
    ttft_ratio = ratio(ours["ttft_ms"]["p99"], passthrough["ttft_ms"]["p99"])
    tps_ratio = ratio(ours["tokens_per_s"], passthrough["tokens_per_s"])
    return {
        "ours": ours,
        "passthrough": passthrough,
        "ours_over_passthrough": {
            "ttft_p50": ratio(ours["ttft_ms"]["p50"], passthrough["ttft_ms"]["p50"]),
            "ttft_p99": ttft_ratio,
            "tokens_per_s": tps_ratio,
            "server_cpu_per_token": ratio(
                ours["server_cpu_us_per_token"] or 0.0, passthrough["server_cpu_us_per_token"] or 0.0
            ),
        },
        "goals": {
            "errors": 0,
            "errors_met": ours["errors"] == 0,
            "every_turn_stored": run.stored["user_messages"] == run.stored["completed_answers"] == run.streams_sent,
            "ratio_max": GOAL_RATIO,
            "ttft_p99_met": ttft_ratio <= GOAL_RATIO,
            "tokens_per_s_met": tps_ratio >= 1 / GOAL_RATIO,
        },
    }


def print_table(results: dict[str, Any], params: dict[str, Any], host: dict[str, Any]) -> None:
    ours, pt, ratios, goals = (
        results["ours"],
        results["passthrough"],
        results["ours_over_passthrough"],
        results["goals"],
    )
    print(
        f"\n{host['cpu_model']}, {host['cpus_usable']} cores, Python {host['python']}; {params['streams']} concurrent "
        f"streams x {params['waves']} waves per server, {params['tokens']} tokens each; history: {params['history']}"
    )
    print(f"\n{'':<36} {'ours':>12} {'pass-through':>13} {'ratio':>7}")
    rows: list[tuple[str, float, float, float | None]] = [
        ("streams", ours["streams"], pt["streams"], None),
        ("errors (goal 0)", ours["errors"], pt["errors"], None),
        ("TTFT p50 (ms)", ours["ttft_ms"]["p50"], pt["ttft_ms"]["p50"], ratios["ttft_p50"]),
        ("TTFT p95 (ms)", ours["ttft_ms"]["p95"], pt["ttft_ms"]["p95"], None),
        ("TTFT p99 (ms)", ours["ttft_ms"]["p99"], pt["ttft_ms"]["p99"], ratios["ttft_p99"]),
        ("tokens/s, all streams (median)", ours["tokens_per_s"], pt["tokens_per_s"], ratios["tokens_per_s"]),
        (
            "server CPU per token (µs)",
            ours["server_cpu_us_per_token"] or 0.0,
            pt["server_cpu_us_per_token"] or 0.0,
            ratios["server_cpu_per_token"],
        ),
    ]
    rows.append(
        (
            "client CPU per wave, median (s)",
            statistics.median(ours["client_cpu_s_waves"]),
            statistics.median(pt["client_cpu_s_waves"]),
            None,
        )
    )
    for key, label in (("start", "start"), ("after_warm_up", "after warm-up"), ("after", "after load")):
        rows.append((f"server RSS {label} (MiB)", ours["rss_kib"][key] / 1024, pt["rss_kib"][key] / 1024, None))
    rows.append(
        (
            "server RSS peak in a wave (MiB)",
            max(ours["rss_kib"]["peak_per_wave"]) / 1024,
            max(pt["rss_kib"]["peak_per_wave"]) / 1024,
            None,
        )
    )
    for label, a, b, r in rows:
        shown = "" if r is None else f"{r:.2f}"
        print(f"{label:<36} {a:>12.1f} {b:>13.1f} {shown:>7}")
    for name, summary in (("ours", ours), ("pass-through", pt)):
        if summary["errors"]:
            kinds = {k: v for k, v in summary["errors_by_kind"].items() if v}
            print(f"{name} errors: {kinds}; e.g. {summary['error_samples']}")
        log = summary["log"]
        if log["errors"] or log["warnings"]:
            print(f"{name} server log: {log['errors']} errors, {log['warnings']} warnings; e.g. {log['samples'][:2]}")
    stored = ours["history"]
    print(
        f"ours stored {stored['user_messages']} user messages and {stored['completed_answers']} completed answers "
        f"for {stored['streams_sent']} streams ({stored['store']})"
    )
    tls = stored.get("postgres_connections_tls")
    if tls:
        print(f"its Postgres connections with TLS: {tls['with_tls']} of {tls['connections']} ({tls['tls_version']})")

    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    print(
        f"\ngoals: 0 errors: {verdict(goals['errors_met'])}; "
        f"every turn stored: {verdict(goals['every_turn_stored'])}; within {GOAL_RATIO:g}x of the pass-through: "
        f"TTFT p99 {verdict(goals['ttft_p99_met'])} ({ratios['ttft_p99']:.2f}x), "
        f"tokens/s {verdict(goals['tokens_per_s_met'])} ({ratios['tokens_per_s']:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"a smaller load: {QUICK}")
    parser.add_argument("--streams", type=int, help=f"concurrent streams per wave (default {FULL['streams']})")
    parser.add_argument("--waves", type=int, help=f"waves per server (default {FULL['waves']})")
    parser.add_argument("--tokens", type=int, help=f"tokens per answer (default {FULL['tokens']})")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per stream before it counts as timeout")
    parser.add_argument("--dsn", default=os.environ.get("POSTGRES_TEST_DSN"), help="default: $POSTGRES_TEST_DSN")
    parser.add_argument("--sqlite", action="store_true", help="SQLite history even when a DSN is given")
    parser.add_argument(
        "--pool-max", type=int, help=f"POSTGRES_POOL_MAX for ours (default: the product's, {POOL_MAX_DEFAULT})"
    )
    parser.add_argument("--output", type=Path, default=None, help="default: results/<name>.json (or _quick.json)")
    args = parser.parse_args()
    preset = QUICK if args.quick else FULL
    streams = int(args.streams or preset["streams"])
    waves = int(args.waves or preset["waves"])
    tokens = int(args.tokens or preset["tokens"])
    dsn = None if args.sqlite else (args.dsn or None)
    host = machine()
    started = datetime.now(UTC)
    measured = asyncio.run(run(dsn, streams, waves, tokens, args.timeout, args.pool_max))
    host["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    params = {
        "quick": args.quick,
        "streams": streams,
        "waves": waves,
        "tokens": tokens,
        "timeout_s": args.timeout,
        "model_delay_s": 0.0,
        "history": measured.history,
        "postgres_pool_max": (args.pool_max or POOL_MAX_DEFAULT) if dsn else None,
        "route": "general chat (kb_prefix general), no retrieval",
    }
    results = summarize(measured)
    results["duration_s"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    print_table(results, params, host)
    save_result(args.output or result_path("concurrency", args.quick), "concurrency", host, started, params, results)


if __name__ == "__main__":
    main()
