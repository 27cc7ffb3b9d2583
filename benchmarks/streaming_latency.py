"""What the server adds per streamed token and to the first token, next to a bare FastAPI pass-through.

SPEC §5 "Token hot path": with a 0 ms scripted model, the latency our server adds per streamed token
(goal p50 < 100 µs), request-to-first-token without retrieval (goal < 20 ms), and the server's whole CPU
per streamed token within 1.5x of a bare FastAPI pass-through of the same model, measured in the same run.

Processes (the client is this process; each server has its own, so no one's CPU is counted for another):

  model        benchmarks.scripted_model: the scripted OpenAI-compatible server, 0 ms per token; the
               answer length comes from `[tokens=N]` in the user message (long answers for the per-token
               figures, short ones for time to first token, from the same process)
  ours         `backend.main.build_app(Settings())` under uvicorn (benchmarks.instrumented_server), with
               AUTH_MODE=none, CONVERSATION_STORE=sqlite in a temp DATA_DIR, an empty KB registry, and the
               model as LLM_BASE_URL/LLM_MODEL; requests use kb_prefix "general", so no retrieval and no
               model routing run: general chat through the same stream executor with an empty plan
  passthrough  benchmarks.passthrough_app: one FastAPI endpoint that streams the same model (raw httpx
               lines + orjson, the adapter's parse) and forwards each content delta as one SSE frame
               with a StreamingResponse; no history, no routing, no store

Each of ours and passthrough runs twice: "plain" (exactly as deployed; CPU, tokens/s and client-side first
token are taken from these) and "instrumented" (`--instrument`: stamps inside the process, see
benchmarks/instrumented_server.py). Four server processes, always driven one request at a time, in an
order that rotates every round so neither side always runs first.

Figures:

  added latency per token   inside the instrumented process: perf_counter_ns when the content delta
                            leaves the model-parsing step → when its SSE frame is handed to uvicorn's
                            `send` (outermost ASGI middleware). p50/p99/mean per stream; median over rounds.
                            Network, uvicorn's own write and the client do not count.
  CPU per token             the plain process's CPU time (user+sys of all its threads, ns-precise from
                            /proc/<pid>/task/*/schedstat; /proc/<pid>/stat ticks if a thread exited) over
                            one whole N-token request, divided by N: everything the server spends per
                            streamed token, fixed per-request costs included. Median over rounds.
  tokens/s                  client-side wall clock of the same requests.
  first token               client-side, from starting the POST to the first `token` frame received, for
                            a short general-chat answer in a fresh session (small history): p50/p95/p99.
                            For the instrumented processes also where that time goes (SPLIT below):
                            client → ASGI call → handler (`TurnService.prepare`: user message stored,
                            history read) → response start → routing (`RouterGraph.route`) → model call →
                            first delta parsed → first token frame sent → client. Every process stamps
                            with perf_counter_ns (CLOCK_MONOTONIC, one clock machine-wide), so the client
                            and server stamps of one request can be subtracted.

Streams go over one keep-alive connection per server; the `/__bench/take` calls over another.

Every stream through our server is checked against the event protocol (start first, done last, once each,
seq 0..n-1, no error, the exact tokens the model sent); the benchmark stops with an error otherwise.

Run:  python -m benchmarks.streaming_latency [--tokens 2000 --rounds 15 --ttft-requests 50]
Writes benchmarks/results/streaming_latency.json and prints a table. Exit status 0 even when a goal is
missed (the verdicts are in the table and the JSON); non-zero when a stream breaks the protocol.
The machine is shared: read the medians, and compare ours with the pass-through of the same run only.

Profile:  python -m benchmarks.streaming_latency --profile /tmp/sl   (the same load on the plain servers
under cProfile; writes /tmp/sl.<server>.prof and prints the top functions; no figures)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson

from backend.infrastructure.config.settings import Settings
from benchmarks.goals import GOAL_RATIO
from benchmarks.graph_probes import machine, percentile, ratio, rel
from benchmarks.scripted_model import tagged
from tests.support.scripted_llm import benchmark_tokens

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "streaming_latency.json"
MODEL = "scripted-model"
API_KEY = "bench-key"
QUESTION = "Tell me a long story."
USER = "bench"
TOKEN_MARK = b'"status":"token"'

GOAL_ADDED_P50_US = 100.0
GOAL_FIRST_TOKEN_MS = 20.0
SETTLE_S = 0.05  # before and after each CPU reading: lets the server finish logging and teardown


class ProtocolViolation(RuntimeError):
    """A stream through our server broke the event protocol (SPEC §5)."""


# -- processes --------------------------------------------------------------------------------------------


@dataclass
class Server:
    kind: str  # "ours" | "passthrough"
    instrumented: bool
    process: subprocess.Popen[str]
    base_url: str
    log: Path

    @property
    def name(self) -> str:
        return f"{self.kind}/{'instrumented' if self.instrumented else 'plain'}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def stream_url(self) -> str:
        return f"{self.base_url}/api/v1/chat/stream" if self.kind == "ours" else f"{self.base_url}/stream"

    def body(self, session_id: str, tokens: int) -> dict[str, Any]:
        message = tagged(QUESTION, tokens)
        if self.kind == "ours":
            return {"session_id": session_id, "message": message, "kb_prefix": "general", "user_id": USER}
        return {"message": message}


def _start(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    with log.open("w") as stderr:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("READY "):
        process.kill()
        process.wait(10)
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{' '.join(command[2:4])} did not start: {line!r}\n{tail}")
    return process, line.removeprefix("READY ")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _clean_env() -> dict[str, str]:
    """This environment without any variable our Settings read (a developer's POSTGRES_HOST, ...)."""
    names = set(Settings.variables())
    env = {key: value for key, value in os.environ.items() if key.upper() not in names}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


ALL_VARIANTS = (("ours", False), ("ours", True), ("passthrough", False), ("passthrough", True))


@contextmanager
def processes(
    tokens: int, variants: Sequence[tuple[str, bool]] = ALL_VARIANTS, profile: Path | None = None
) -> Iterator[list[Server]]:
    """The model, then the (kind, instrumented) servers asked for; all stopped on exit.

    With `profile`, every server runs under cProfile and writes `<profile>.<kind>-<variant>.prof` when stopped.
    """
    with tempfile.TemporaryDirectory(prefix="streaming-latency-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        env = _clean_env()
        model_cmd = [sys.executable, "-m", "benchmarks.scripted_model", "--port", "0", "--tokens", str(tokens)]
        model, model_url = _start(model_cmd, env, work, work / "model.log")
        stack.callback(_stop, model)
        registry = work / "kb_registry.toml"
        registry.write_text("# no knowledge bases: general chat only\n")
        servers: list[Server] = []
        for kind, instrumented in variants:
            label = f"{kind}-{'instrumented' if instrumented else 'plain'}"
            command = [sys.executable, "-m", "benchmarks.instrumented_server", "--app", kind]
            server_env = dict(env)
            if kind == "ours":
                data_dir = work / label
                data_dir.mkdir()
                server_env.update(
                    AUTH_MODE="none",
                    CONVERSATION_STORE="sqlite",
                    DATA_DIR=str(data_dir),
                    KB_REGISTRY_PATH=str(registry),
                    LLM_BASE_URL=model_url,
                    LLM_MODEL=MODEL,
                    LLM_API_KEY=API_KEY,
                )
            else:
                command += ["--upstream", model_url, "--model", MODEL]
            if instrumented:
                command.append("--instrument")
            if profile is not None:
                command += ["--profile", f"{profile}.{label}.prof"]
            log = work / f"{label}.log"
            process, url = _start(command, server_env, work, log)
            stack.callback(_stop, process)
            servers.append(Server(kind, instrumented, process, url, log))
        yield servers


# -- CPU of another process ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuSample:
    threads_ns: dict[int, int]  # per thread: time on CPU (schedstat, ns)
    ticks: int  # utime + stime of the whole process, dead threads included (clock ticks)


def read_cpu(pid: int) -> CpuSample:
    threads: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            threads[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended while we looked
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return CpuSample(threads, int(fields[11]) + int(fields[12]))


def cpu_ns_between(before: CpuSample, after: CpuSample) -> tuple[int, str]:
    """CPU ns spent between two samples and how it was read."""
    if before.threads_ns.keys() <= after.threads_ns.keys():
        return sum(ns - before.threads_ns.get(tid, 0) for tid, ns in after.threads_ns.items()), "schedstat"
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    return (after.ticks - before.ticks) * tick_ns, "ticks"  # a thread exited: its schedstat is gone


# -- one stream ------------------------------------------------------------------------------------------------


@dataclass
class StreamResult:
    tokens: int
    wall_ns: int
    first_token_ns: int  # from starting the POST to the first token frame received
    started_at_ns: int  # perf_counter_ns (CLOCK_MONOTONIC: comparable with the server processes' stamps)
    frames: list[dict[str, Any]] = field(default_factory=list)


async def stream_once(client: httpx.AsyncClient, server: Server, session_id: str, tokens: int) -> StreamResult:
    body = server.body(session_id, tokens)
    chunks: list[bytes] = []
    first = 0
    start = time.perf_counter_ns()
    async with client.stream("POST", server.stream_url, json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise ProtocolViolation(f"{server.name}: HTTP {response.status_code}: {response.text[:300]}")
        async for chunk in response.aiter_raw():
            if not first and TOKEN_MARK in chunk:
                first = time.perf_counter_ns()
            chunks.append(chunk)
    end = time.perf_counter_ns()
    frames = parse_frames(b"".join(chunks), server.name)
    check_stream(server, frames, tokens)
    return StreamResult(tokens, end - start, first - start, start, frames)


def parse_frames(raw: bytes, name: str) -> list[dict[str, Any]]:
    if b"\r" in raw:
        raise ProtocolViolation(f"{name}: frames must use LF separators")
    frames: list[dict[str, Any]] = []
    for block in raw.split(b"\n\n"):
        if not block or block.startswith(b":"):
            continue  # the end, or a `: ping` comment
        if not block.startswith(b"data: ") or b"\n" in block:
            raise ProtocolViolation(f"{name}: not a single-line `data:` frame: {block[:120]!r}")
        frames.append(orjson.loads(block[6:]))
    return frames


def check_stream(server: Server, frames: Sequence[dict[str, Any]], tokens: int) -> None:
    """Ours: the whole SPEC §5 protocol. Both: exactly the tokens the model sent, one frame each."""
    expected = benchmark_tokens(tokens)
    got = [frame.get("content") for frame in frames if frame.get("status") == "token"]
    if got != expected:
        raise ProtocolViolation(
            f"{server.name}: {len(got)} token frames, expected {tokens}"
            + ("" if len(got) != tokens else " (same count, different content)")
        )
    if server.kind != "ours":
        return
    statuses = [frame.get("status") for frame in frames]
    problems = []
    if not statuses or statuses[0] != "start" or statuses.count("start") != 1:
        problems.append("`start` is not first exactly once")
    if not statuses or statuses[-1] != "done" or statuses.count("done") != 1:
        problems.append("`done` is not last exactly once")
    if "error" in statuses:
        problems.append(f"error event: {next(f for f in frames if f.get('status') == 'error')}")
    if [frame.get("seq") for frame in frames] != list(range(len(frames))):
        problems.append("seq is not 0, 1, 2, ...")
    if len({frame.get("request_id") for frame in frames}) != 1:
        problems.append("request_id differs between events")
    if any(not isinstance(frame.get("ts"), int | float) for frame in frames):
        problems.append("an event has no numeric ts")
    if not frames or not frames[-1].get("message_id"):
        problems.append("`done` carries no message_id (answer not stored)")
    if problems:
        raise ProtocolViolation(f"{server.name}: " + "; ".join(problems))


async def take_stamps(client: httpx.AsyncClient, server: Server) -> dict[str, Any]:
    response = await client.get(f"{server.base_url}/__bench/take")
    response.raise_for_status()
    taken: dict[str, Any] = response.json()
    if taken["unpaired_frames"] or taken["unpaired_deltas"]:
        raise ProtocolViolation(
            f"{server.name}: {taken['unpaired_frames']} token frames without a model delta and "
            f"{taken['unpaired_deltas']} deltas without a frame (one delta must be one token event)"
        )
    return taken


# -- statistics ------------------------------------------------------------------------------------------------


def spread(values: Sequence[float], digits: int = 2) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "p99": round(percentile(values, 99), digits),
        "mean": round(statistics.fmean(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def median_of(rounds: Sequence[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 2)


# -- phases ------------------------------------------------------------------------------------------------------


@dataclass
class Clients:
    """A connection per server for the streams and another for `/__bench/take`, so that the measured
    connection carries nothing but the measured requests."""

    streams: dict[str, httpx.AsyncClient]
    control: httpx.AsyncClient


@asynccontextmanager
async def open_clients(servers: Sequence[Server]) -> AsyncIterator[Clients]:
    timeout = httpx.Timeout(120.0)
    clients = Clients({server.name: httpx.AsyncClient(timeout=timeout) for server in servers}, httpx.AsyncClient())
    try:
        yield clients
    finally:
        for client in [*clients.streams.values(), clients.control]:
            await client.aclose()


async def warm_up(clients: Clients, servers: Sequence[Server], tokens: int) -> None:
    for server in servers:
        for i in range(3):
            await stream_once(clients.streams[server.name], server, f"warm-{i}", tokens)
            await stream_once(clients.streams[server.name], server, f"warm-short-{i}", 16)
        if server.instrumented:
            await take_stamps(clients.control, server)


def rotated(servers: Sequence[Server], turn: int) -> list[Server]:
    shift = turn % len(servers)
    return [*servers[shift:], *servers[:shift]]


async def per_token_rounds(
    clients: Clients, servers: Sequence[Server], tokens: int, rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """Per server, one record per round: CPU µs/token, tokens/s and (instrumented) added latency."""
    records: dict[str, list[dict[str, Any]]] = {server.name: [] for server in servers}
    for turn in range(rounds):
        for server in rotated(servers, turn):
            await asyncio.sleep(SETTLE_S)
            before = read_cpu(server.pid)
            result = await stream_once(clients.streams[server.name], server, f"tokens-{turn}", tokens)
            await asyncio.sleep(SETTLE_S)
            cpu_ns, cpu_source = cpu_ns_between(before, read_cpu(server.pid))
            record: dict[str, Any] = {
                "cpu_us_per_token": cpu_ns / tokens / 1e3,
                "cpu_source": cpu_source,
                "tokens_per_s": tokens / (result.wall_ns / 1e9),
                "wall_s": result.wall_ns / 1e9,
            }
            if server.instrumented:
                added = [ns / 1e3 for ns in (await take_stamps(clients.control, server))["added_ns"]]
                if len(added) != tokens:
                    raise ProtocolViolation(f"{server.name}: {len(added)} stamped frames, expected {tokens}")
                record.update(
                    added_p50_us=percentile(added, 50),
                    added_p99_us=percentile(added, 99),
                    added_mean_us=statistics.fmean(added),
                    added_max_us=max(added),
                )
            records[server.name].append(record)
    return records


async def first_token_requests(
    clients: Clients, servers: Sequence[Server], count: int, tokens: int
) -> dict[str, dict[str, list[float]]]:
    """Per server: client-side first-token ms and (instrumented) the server-side split, per request."""
    samples: dict[str, dict[str, list[float]]] = {server.name: {"client_ms": []} for server in servers}
    for i in range(count):
        for server in rotated(servers, i):
            result = await stream_once(clients.streams[server.name], server, f"first-{i}", tokens)
            samples[server.name]["client_ms"].append(result.first_token_ns / 1e6)
            if server.instrumented:
                (record,) = (await take_stamps(clients.control, server))["requests"]
                # perf_counter_ns is CLOCK_MONOTONIC, one clock for every process on this machine.
                record["client_start"] = result.started_at_ns
                record["client_first_token"] = result.started_at_ns + result.first_token_ns
                for part, value in server_split(record).items():
                    samples[server.name].setdefault(part, []).append(value)
    return samples


# (name, from, to, what happens in between); steps whose stamps a server lacks are left out for it.
SPLIT = (
    ("client_to_asgi_ms", "client_start", "arrived", "client sends, uvicorn reads and parses the request"),
    ("asgi_to_handler_ms", "arrived", "prepare_start", "middleware, body read, validation, dependencies"),
    ("prepare_ms", "prepare_start", "prepare_end", "user message stored, history read (SQLite)"),
    ("handler_to_response_start_ms", "prepare_end", "response_start", "response created, headers sent"),
    ("arrived_to_response_start_ms", "arrived", "response_start", "all of the above"),
    ("response_start_to_route_ms", "response_start", "route_start", "start and progress events"),
    ("route_ms", "route_start", "route_end", "RouterGraph.route (general: no model call)"),
    ("route_to_model_call_ms", "route_end", "model_call", "progress events, prompt"),
    ("response_start_to_model_call_ms", "response_start", "model_call", "all of the above"),
    ("model_call_to_first_delta_ms", "model_call", "first_delta", "upstream request, model's first token"),
    ("first_delta_to_first_token_sent_ms", "first_delta", "first_token_sent", "first token through the server"),
    ("arrived_to_first_token_sent_ms", "arrived", "first_token_sent", "request to first token, in-process"),
    ("sent_to_client_ms", "first_token_sent", "client_first_token", "uvicorn writes, client receives"),
)


def server_split(record: dict[str, int]) -> dict[str, float]:
    return {
        name: (record[end] - record[start]) / 1e6 for name, start, end, _ in SPLIT if start in record and end in record
    }


# -- report ------------------------------------------------------------------------------------------------------


def summarize(per_token: dict[str, list[dict[str, Any]]], first: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    def cpu(name: str) -> dict[str, Any]:
        rounds = per_token[name]
        return {
            "cpu_us_per_token_median": median_of(rounds, "cpu_us_per_token"),
            "cpu_us_per_token_min": round(min(r["cpu_us_per_token"] for r in rounds), 2),
            "cpu_us_per_token_rounds": [round(r["cpu_us_per_token"], 2) for r in rounds],
            "cpu_source": sorted({r["cpu_source"] for r in rounds}),
            "tokens_per_s_median": round(median_of(rounds, "tokens_per_s")),
        }

    def added(name: str) -> dict[str, Any]:
        rounds = per_token[name]
        return {
            "p50_us_median": median_of(rounds, "added_p50_us"),
            "p99_us_median": median_of(rounds, "added_p99_us"),
            "mean_us_median": median_of(rounds, "added_mean_us"),
            "p50_us_rounds": [round(r["added_p50_us"], 2) for r in rounds],
            "p99_us_rounds": [round(r["added_p99_us"], 2) for r in rounds],
            "max_us_rounds": [round(r["added_max_us"], 1) for r in rounds],
        }

    ours_cpu, pt_cpu = cpu("ours/plain"), cpu("passthrough/plain")
    ours_cpu_i, pt_cpu_i = cpu("ours/instrumented"), cpu("passthrough/instrumented")
    ours_added, pt_added = added("ours/instrumented"), added("passthrough/instrumented")
    first_token = {name: {part: spread(values) for part, values in parts.items()} for name, parts in first.items()}
    ours_first = first_token["ours/plain"]["client_ms"]
    pt_first = first_token["passthrough/plain"]["client_ms"]
    cpu_ratio = ratio(ours_cpu["cpu_us_per_token_median"], pt_cpu["cpu_us_per_token_median"])
    return {
        "added_latency_per_token_us": {
            "ours": ours_added,
            "passthrough": pt_added,
            "ratio_p50": ratio(ours_added["p50_us_median"], pt_added["p50_us_median"]),
            "ratio_p99": ratio(ours_added["p99_us_median"], pt_added["p99_us_median"]),
        },
        "cpu_per_token": {
            "ours": ours_cpu,
            "passthrough": pt_cpu,
            "ratio": cpu_ratio,
            "ratio_of_minimums": ratio(ours_cpu["cpu_us_per_token_min"], pt_cpu["cpu_us_per_token_min"]),
            "instrumented": {
                "ours": ours_cpu_i,
                "passthrough": pt_cpu_i,
                "ratio": ratio(ours_cpu_i["cpu_us_per_token_median"], pt_cpu_i["cpu_us_per_token_median"]),
            },
        },
        "first_token_ms": {
            **first_token,
            "ratio_p50": ratio(ours_first["p50"], pt_first["p50"]),
            "ratio_p99": ratio(ours_first["p99"], pt_first["p99"]),
        },
        "goals": {
            "added_p50_us": GOAL_ADDED_P50_US,
            "added_p50_met": ours_added["p50_us_median"] < GOAL_ADDED_P50_US,
            "first_token_ms": GOAL_FIRST_TOKEN_MS,
            "first_token_p50_met": ours_first["p50"] < GOAL_FIRST_TOKEN_MS,
            "first_token_p99_met": ours_first["p99"] < GOAL_FIRST_TOKEN_MS,
            "cpu_ratio_max": GOAL_RATIO,
            "cpu_ratio_met": cpu_ratio <= GOAL_RATIO,
        },
    }


def print_table(summary: dict[str, Any], params: dict[str, Any], host: dict[str, Any]) -> None:
    added, cpu, first, goals = (
        summary["added_latency_per_token_us"],
        summary["cpu_per_token"],
        summary["first_token_ms"],
        summary["goals"],
    )

    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    print(
        f"\n{host['cpu_model']}, {host['cpus_usable']} cores, Python {host['python']}; "
        f"{params['tokens']} tokens x {params['rounds']} rounds, {params['ttft_requests']} first-token requests"
    )
    print(f"\n{'per streamed token (median of rounds)':<44} {'ours':>10} {'pass-through':>13} {'ratio':>7}")
    rows = [
        ("added latency p50 (µs, in-process)", added["ours"]["p50_us_median"], added["passthrough"]["p50_us_median"]),
        ("added latency p99 (µs, in-process)", added["ours"]["p99_us_median"], added["passthrough"]["p99_us_median"]),
        (
            "added latency mean (µs, in-process)",
            added["ours"]["mean_us_median"],
            added["passthrough"]["mean_us_median"],
        ),
        (
            "server CPU per token (µs)",
            cpu["ours"]["cpu_us_per_token_median"],
            cpu["passthrough"]["cpu_us_per_token_median"],
        ),
        (
            "server CPU per token, min of rounds (µs)",
            cpu["ours"]["cpu_us_per_token_min"],
            cpu["passthrough"]["cpu_us_per_token_min"],
        ),
        (
            "  same, instrumented processes (µs)",
            cpu["instrumented"]["ours"]["cpu_us_per_token_median"],
            cpu["instrumented"]["passthrough"]["cpu_us_per_token_median"],
        ),
        (
            "tokens/s per stream (client wall clock)",
            cpu["ours"]["tokens_per_s_median"],
            cpu["passthrough"]["tokens_per_s_median"],
        ),
    ]
    for label, ours, passthrough in rows:
        print(f"{label:<44} {ours:>10.1f} {passthrough:>13.1f} {ratio(ours, passthrough):>7.2f}")
    print(f"\n{'request → first token, general chat (ms)':<44} {'p50':>8} {'p95':>8} {'p99':>8}")
    for name in ("ours/plain", "passthrough/plain", "ours/instrumented", "passthrough/instrumented"):
        s = first[name]["client_ms"]
        print(f"{'client-side, ' + name:<44} {s['p50']:>8.2f} {s['p95']:>8.2f} {s['p99']:>8.2f}")
    for name in ("ours/instrumented", "passthrough/instrumented"):
        print(f"server-side split, {name}:")
        for part, _, _, _ in SPLIT:
            if part in first[name]:
                s = first[name][part]
                label = part.removesuffix("_ms").replace("_", " ")
                print(f"  {label:<42} {s['p50']:>8.3f} {s['p95']:>8.3f} {s['p99']:>8.3f}")
    print(
        f"\ngoals: added p50 < {GOAL_ADDED_P50_US:g} µs: {verdict(goals['added_p50_met'])}; "
        f"first token p50 < {GOAL_FIRST_TOKEN_MS:g} ms: {verdict(goals['first_token_p50_met'])} "
        f"(p99: {verdict(goals['first_token_p99_met'])}); "
        f"CPU/token ≤ {GOAL_RATIO:g}x pass-through: {verdict(goals['cpu_ratio_met'])} ({cpu['ratio']:.2f}x)"
    )


async def run(tokens: int, rounds: int, ttft_requests: int, ttft_tokens: int) -> dict[str, Any]:
    with processes(tokens) as servers:
        async with open_clients(servers) as clients:
            await warm_up(clients, servers, tokens)
            per_token = await per_token_rounds(clients, servers, tokens, rounds)
            first = await first_token_requests(clients, servers, ttft_requests, ttft_tokens)
    return {"per_token_rounds": per_token, "first_token_samples": first}


async def run_profiled(tokens: int, rounds: int, ttft_requests: int, ttft_tokens: int, prefix: Path) -> None:
    """The same load on plain servers running under cProfile (the figures are not comparable: cProfile
    slows every call); writes one .prof per server and prints where each spends its time."""
    variants = (("ours", False), ("passthrough", False))
    with processes(tokens, variants, profile=prefix) as servers:
        async with open_clients(servers) as clients:
            await warm_up(clients, servers, tokens)
            await per_token_rounds(clients, servers, tokens, rounds)
            await first_token_requests(clients, servers, ttft_requests, ttft_tokens)
    for kind, _ in variants:
        path = Path(f"{prefix}.{kind}-plain.prof")
        print(f"\n==== {path} (main thread; sorted by own time) ====")
        pstats.Stats(str(path)).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per answer for the per-token figures")
    # A 2,000-token round takes about 75 ms of server time: with 5 rounds the CPU ratio moved between 1.42
    # and 1.54 from run to run on 2026-11-27; 15 rounds (about 10 s more) steady the medians.
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ttft-requests", type=int, default=50, help="first-token requests per server")
    parser.add_argument("--ttft-tokens", type=int, default=16, help="tokens per answer for first-token requests")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="PREFIX",
        help="instead: run the plain servers under cProfile, "
        "write PREFIX.<server>.prof and print the top functions (no figures, nothing written to --output)",
    )
    args = parser.parse_args()
    if args.profile:
        asyncio.run(run_profiled(args.tokens, args.rounds, args.ttft_requests, args.ttft_tokens, args.profile))
        return
    host = machine()
    started = datetime.now(UTC)
    raw = asyncio.run(run(args.tokens, args.rounds, args.ttft_requests, args.ttft_tokens))
    params = {
        "tokens": args.tokens,
        "rounds": args.rounds,
        "ttft_requests": args.ttft_requests,
        "ttft_tokens": args.ttft_tokens,
        "model_delay_s": 0.0,
    }
    summary = summarize(raw["per_token_rounds"], raw["first_token_samples"])
    host["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    print_table(summary, params, host)
    per_token_rounds_rounded = {
        name: [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in records]
        for name, records in raw["per_token_rounds"].items()
    }
    document = {
        "benchmark": "streaming_latency",
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "machine": host,
        "parameters": params,
        **summary,
        "per_token_rounds": per_token_rounds_rounded,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {rel(args.output)}")


if __name__ == "__main__":
    main()
