"""Sustained load on loopback (issue 6): C concurrent streams held for D seconds, in R rounds.

The processes are those of benchmarks/concurrency.py (the scripted model at 0 ms per token and our server under
uvicorn, general chat, history in Postgres when a DSN is given, else SQLite); only our server is loaded. In a
round, C streams are in flight at every moment: as one ends, the next opens (a fresh session each), until D
seconds have passed; then the round waits for the streams still open. Each stream is judged as in
concurrency.py (ok, or an error of one kind).

Figures per round: streams ended, errors by kind, tokens/s, server RSS 1 s after the round (VmRSS) and its peak
during it. Goals: zero client errors; no memory growth across rounds (RSS after the last round within ±10% of
after the first); history rows equal to requests sent (one user message per stream, one completed answer per ok
stream, read from the store after the last round).

Run:  python -m benchmarks.load [--streams 300 --seconds 60 --rounds 3 --tokens 64] [--quick]
Writes benchmarks/results/load.json (`--quick`: load_quick.json) and, unless --no-doc, the load table of
docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.concurrency import ERROR_KINDS, Outcome, log_lines, one_stream, servers
from benchmarks.graph_probes import RssSampler, machine, status_kib
from benchmarks.reliability import update_doc

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FULL = {"streams": 300, "seconds": 60, "rounds": 3, "tokens": 64}
QUICK = {"streams": 50, "seconds": 10, "rounds": 2, "tokens": 32}
RSS_TOLERANCE = 0.10
DOC_BEGIN, DOC_END = "<!-- load-table:begin -->", "<!-- load-table:end -->"


@dataclass
class Round:
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    rss_after_kib: int = 0
    rss_peak_kib: int = 0

    def summary(self) -> dict[str, Any]:
        kinds = Counter(o.kind for o in self.outcomes)
        tokens = sum(o.tokens for o in self.outcomes)
        return {
            "streams": len(self.outcomes),
            "errors": {kind: kinds.get(kind, 0) for kind in ERROR_KINDS},
            "error_samples": [o.detail for o in self.outcomes if o.kind != "ok"][:3],
            "wall_s": round(self.wall_s, 2),
            "tokens_per_s": round(tokens / self.wall_s) if self.wall_s else 0,
            "rss_after_mib": round(self.rss_after_kib / 1024, 1),
            "rss_peak_mib": round(self.rss_peak_kib / 1024, 1),
        }


async def sustain(server: Any, streams: int, seconds: float, tokens: int, label: str, timeout_s: float) -> Round:
    """`streams` streams in flight until `seconds` have passed, then the open ones are read to their end."""
    result = Round()
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    started = time.perf_counter()
    deadline = started + seconds
    counter = 0

    async def lane(client: httpx.AsyncClient, lane_id: int) -> None:
        nonlocal counter
        while time.perf_counter() < deadline:
            counter += 1
            outcome = await one_stream(client, server, f"{label}-{lane_id}-{counter}", tokens, timeout_s)
            result.outcomes.append(outcome)

    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout_s)) as client:
        await asyncio.gather(*(lane(client, i) for i in range(streams)))
    result.wall_s = time.perf_counter() - started
    return result


async def run(
    dsn: str | None, streams: int, seconds: float, rounds: int, tokens: int, timeout_s: float
) -> dict[str, Any]:
    async with servers(dsn, tokens, None) as (started, history):
        ours = next(server for server in started if server.kind == "ours")
        warm = await sustain(ours, 20, 2, tokens, "warm", timeout_s)  # not a round; counted in the history check
        done: list[Round] = []
        with RssSampler({"ours": ours.pid}, interval_s=0.2) as sampler:
            for number in range(rounds):
                sampler.window()
                current = await sustain(ours, streams, seconds, tokens, f"r{number}", timeout_s)
                current.rss_peak_kib = sampler.window()["ours"]
                await asyncio.sleep(1.0)
                current.rss_after_kib = status_kib(ours.pid, "VmRSS")
                done.append(current)
                summary = current.summary()
                print(
                    f"  round {number + 1}/{rounds}: {summary['streams']} streams in {summary['wall_s']} s, "
                    f"{summary['tokens_per_s']} tokens/s, errors {sum(summary['errors'].values())}, "
                    f"RSS {summary['rss_after_mib']} MiB (peak {summary['rss_peak_mib']})",
                    flush=True,
                )
        stored = await history.counts()
        logs = log_lines(ours.log)
        storage = history.describe()
    return {"warm_up": warm, "rounds": done, "stored": stored, "logs": logs, "history": storage}


def report(raw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    rounds: list[Round] = raw["rounds"]
    warm: Round = raw["warm_up"]
    summaries = [r.summary() for r in rounds]
    sent = len(warm.outcomes) + sum(s["streams"] for s in summaries)
    ok = sum(o.kind == "ok" for r in [warm, *rounds] for o in r.outcomes)
    errors = sum(sum(s["errors"].values()) for s in summaries)
    first, last = rounds[0].rss_after_kib, rounds[-1].rss_after_kib
    growth = (last - first) / first if first else None
    stored = raw["stored"]
    return {
        "benchmark": "load",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "params": params,
        "history": raw["history"],
        "rounds": summaries,
        "requests_sent": sent,
        "stored": stored,
        "server_log": raw["logs"],
        "goals": {
            "zero_client_errors": {"measured": errors, "met": errors == 0},
            "rss_within_10_percent": {
                "measured": None if growth is None else round(growth, 4),
                "met": growth is not None and abs(growth) <= RSS_TOLERANCE,
            },
            "history_rows_equal_requests": {
                "measured": {"sent": sent, "user_messages": stored["user_messages"], "ok": ok},
                "met": stored["user_messages"] == sent and stored["completed_answers"] == ok,
            },
        },
    }


def markdown(summary: dict[str, Any]) -> str:
    params, goals = summary["params"], summary["goals"]
    lines = [
        f"{params['streams']} concurrent streams held for {params['seconds']:g} s per round, {params['tokens']} tokens "
        f"each, history in {summary['history']}.",
        "",
        "| round | streams ended | client errors | tokens/s | server RSS after (MiB) | RSS peak (MiB) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for number, row in enumerate(summary["rounds"], 1):
        errors = sum(row["errors"].values())
        lines.append(
            f"| {number} | {row['streams']} | {errors} | {row['tokens_per_s']} | {row['rss_after_mib']} "
            f"| {row['rss_peak_mib']} |"
        )
    stored = summary["stored"]
    growth = goals["rss_within_10_percent"]["measured"]
    lines += [
        "",
        f"Requests sent {summary['requests_sent']} (warm-up included); user messages stored "
        f"{stored['user_messages']}, completed answers stored {stored['completed_answers']}; RSS after the last "
        f"round vs the first: {'–' if growth is None else f'{growth * 100:+.1f} %'}. Goals: "
        + ", ".join(
            f"{name.replace('_', ' ')} {'met' if goal['met'] else '**missed**'}" for name, goal in goals.items()
        )
        + f". Generated {summary['date'][:10]} by `python -m benchmarks.load`.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"a smaller load: {QUICK}")
    parser.add_argument("--streams", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per stream before it counts as timeout")
    parser.add_argument("--dsn", default=os.environ.get("POSTGRES_TEST_DSN"), help="default: $POSTGRES_TEST_DSN")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--no-doc", action="store_true", help="only write the JSON results")
    args = parser.parse_args()
    params = dict(QUICK if args.quick else FULL)
    for name in params:
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    raw = asyncio.run(
        run(args.dsn, params["streams"], params["seconds"], params["rounds"], params["tokens"], args.timeout)
    )
    summary = report(raw, params)
    output = args.output or RESULTS / ("load_quick.json" if args.quick else "load.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(summary, indent=2) + "\n")
    if not args.no_doc and not args.quick:
        update_doc(markdown(summary), DOC_BEGIN, DOC_END)
    for name, goal in summary["goals"].items():
        print(f"{name:30} {'met' if goal['met'] else 'MISSED':7} {goal['measured']}")


if __name__ == "__main__":
    main()
