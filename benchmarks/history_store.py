"""Throughput of the conversation stores under N concurrent chat sessions, next to a raw asyncpg loop.

One turn is exactly what one chat turn asks of the store (backend/application/chat/turns.py,
`TurnService.prepare` then `save_answer`; the streaming and the plain use case call the same):

  start    start_turn(user, session, user message with its request_id, history_limit = HISTORY_MAX_MESSAGES
           = 20): the conversation upserted, the message stored and the history before it read
  append   append_message(assistant answer: ~530 characters, 3 citations, a debug record, same request_id)

N sessions (default 1, 8, 32) run at once in one event loop, each doing its turns one after another; a
phase is a fixed number of turns split evenly over its N sessions, every session fresh (its own user and
session id). Targets, each driven by the same loop:

  postgres     `await PostgresConversationStore.open(dsn)` with the product's pool (POSTGRES_POOL_MIN/MAX
               defaults, 1..10), on a database of its own that this script creates and drops
  raw_asyncpg  a bare asyncpg pool of the same size on the same database, into scratch tables made with
               `CREATE TABLE ... (LIKE <product table> INCLUDING ALL)` plus the same foreign key (so the
               same indexes, defaults and constraints): a start is one autocommit statement that upserts the
               conversation, inserts the message and selects the 21 newest rows before it (the product's
               statement without its idempotency clause); an append is one autocommit `INSERT ... RETURNING`
               of the same columns and values (JSON as text); rows stay asyncpg Records. The floor of what a
               store must send; the difference is the store (its row lock and idempotency insert per append,
               its codecs and result objects)
  sqlite       `await SqliteConversationStore.open(<temp dir>/chat_history.db)`, the embedded default
               (one connection, WAL, synchronous=NORMAL), in a temp dir (on this machine the same disk as Postgres)

Each round runs every (N, target) phase once, the order of targets rotating every round and N so that no
target always runs first; one warm-up phase per target before the first round. Figures per (target, N):
turns/s, appends/s and lists/s (operations completed over the phase's wall clock, the operations being
interleaved as in chat: median over rounds), p50/p95 ms per operation (all rounds pooled), and the CPU
time of this process per turn (driver, store and, for SQLite, its worker thread). Ratios postgres/raw:
throughput (below 1: ours is slower) and latency p50/p95 (above 1: ours is slower).

Postgres: the DSN comes from --dsn or POSTGRES_TEST_DSN (`eval "$(scripts/services/postgres.sh)"`). The
database `bench_history` is dropped if left over, created owned by the DSN's role (through that role when
it may create databases, else as the local `postgres` OS user via runuser/sudo, as the service script
does), and dropped at the end. No other database is touched. Without a DSN only SQLite runs. The JSON
records whether the connections used TLS (pg_stat_ssl): asyncpg's default sslmode `prefer` takes TLS on
loopback too when the server offers it; `--dsn "$POSTGRES_TEST_DSN?sslmode=disable"` measures without.

Run:  python -m benchmarks.history_store [--quick] [--sessions 1,8,32 --turns 480 --rounds 3]
Writes benchmarks/results/history_store.json (`--quick`:
history_store_quick.json) and prints a table. The machine is shared: compare figures of
the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from backend.domain.conversation import Citation, NewMessage, Role, StartedTurn
from backend.infrastructure.config.settings import ChatEnv, ConversationStoreEnv
from backend.infrastructure.persistence.common import citations_to_json, dump_json
from backend.infrastructure.persistence.postgres.conversation_store import PostgresConversationStore
from backend.infrastructure.persistence.postgres.database import describe_dsn
from backend.infrastructure.persistence.sqlite.conversation_store import SqliteConversationStore
from benchmarks.graph_probes import machine, percentile, ratio, result_path, save_result

DATABASE = "bench_history"
OPS = ("start", "append")
HISTORY_LIMIT = int(ChatEnv.model_fields["history_max_messages"].default)  # as TurnService.prepare asks
POOL_MIN = int(ConversationStoreEnv.model_fields["postgres_pool_min"].default)
POOL_MAX = int(ConversationStoreEnv.model_fields["postgres_pool_max"].default)

QUICK: dict[str, Any] = {"sessions": "1,8,32", "turns": 96, "rounds": 2}
FULL: dict[str, Any] = {"sessions": "1,8,32", "turns": 480, "rounds": 3}


# -- a database of our own -------------------------------------------------------------------------------------

_SAFE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at another database on the same server (user, password and options kept)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


def _psql_as_postgres(port: int, sql: str) -> None:
    """Run one admin statement as the `postgres` OS user on the local socket (peer auth), as
    scripts/services/postgres.sh does."""
    psql = ["psql", "-p", str(port), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql]
    if getpass.getuser() == "postgres":
        command = psql
    elif os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *psql]
    else:
        command = ["sudo", "-n", "-u", "postgres", "--", *psql]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed: {done.stderr.strip() or done.stdout.strip()}")


async def _admin(dsn: str, sql: str) -> None:
    """`sql` through the DSN's role; if that role may not (CREATE DATABASE needs CREATEDB), as `postgres`."""
    try:
        conn = await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise RuntimeError(f"cannot connect to {describe_dsn(dsn)}: {exc}") from exc
    try:
        await conn.execute(sql)
        return
    except asyncpg.InsufficientPrivilegeError:
        pass
    finally:
        await conn.close()
    host = urlsplit(dsn).hostname or "localhost"
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise RuntimeError(f"the role of {describe_dsn(dsn)} may not run {sql!r}, and the server is not local")
    await asyncio.to_thread(_psql_as_postgres, urlsplit(dsn).port or 5432, sql)


@asynccontextmanager
async def scratch_database(dsn: str, name: str) -> AsyncIterator[str]:
    """Create database `name` (dropping a leftover of an earlier run first), owned by the DSN's role;
    yield its DSN; drop it on exit. `dsn` names any database the role may connect to."""
    if not _SAFE_NAME.fullmatch(name):
        raise ValueError(f"not a plain database name: {name!r}")
    owner = urlsplit(dsn).username or getpass.getuser()
    if not _SAFE_NAME.fullmatch(owner):
        raise ValueError(f"not a plain role name: {owner!r}")
    drop = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    await _admin(dsn, drop)
    await _admin(dsn, f"CREATE DATABASE {name} OWNER {owner}")
    try:
        yield with_database(dsn, name)
    finally:
        await _admin(dsn, drop)


async def tls_in_use(dsn: str) -> dict[str, Any]:
    """Whether the other connections to the DSN's database use TLS (asyncpg's default sslmode is `prefer`:
    TLS whenever the server offers it, loopback included), from pg_stat_ssl."""
    database = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS connections, count(*) FILTER (WHERE s.ssl) AS tls, max(s.version) AS version "
            "FROM pg_stat_ssl AS s JOIN pg_stat_activity AS a USING (pid) "
            "WHERE a.datname = $1 AND a.pid <> pg_backend_pid()",
            database,
        )
    finally:
        await conn.close()
    return {"connections": int(row["connections"]), "with_tls": int(row["tls"]), "tls_version": row["version"]}


# -- the workload -----------------------------------------------------------------------------------------------

USER_TEXT = "Turn {turn} of {session}: when was Wrenfield Orchard founded, and by whom?"
ANSWER_TEXT = (
    "Wrenfield Orchard was founded in 1921 by Agnes and Tobias Wren [1], who planted the first forty "
    "Kingston Black trees on the south slope [2]. The cider mill followed in 1934 [3]. "
) * 3  # ~560 characters, about a hundred tokens
CITATIONS = tuple(
    Citation(
        id=f"chunk:{n:032x}",
        title=f"Wrenfield history, part {n}",
        doc_id=f"{n:032x}",
        chunk_id=f"{n + 100:032x}",
        snippet="Agnes and Tobias Wren planted the first forty Kingston Black trees on the south slope. " * 2,
    )
    for n in (1, 2, 3)
)
DEBUG = {
    "route": {
        "requested_kb_prefix": "orchard",
        "routed_kb_prefix": "orchard",
        "kb_prefix": "orchard",
        "confidence": 1.0,
        "method": "requested",
        "reason": "requested by the client",
        "worker_name": "orchard:naive_rag_agent:retrieve_only",
    },
    "generation_mode": "llm",
}


class Target(Protocol):
    """The two store calls of a chat turn."""

    name: str

    async def start(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> Any:
        """What has the turn's `conversation_id` and the messages stored before it (`earlier`)."""
        ...

    async def append(self, conversation_id: Any, message: NewMessage) -> Any: ...


class StoreTarget:
    """One of our ConversationStore adapters, called exactly as TurnService calls it."""

    def __init__(self, name: str, store: PostgresConversationStore | SqliteConversationStore) -> None:
        self.name = name
        self.store = store

    async def start(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> StartedTurn:
        return await self.store.start_turn(user_id, session_id, message, history_limit)

    async def append(self, conversation_id: str, message: NewMessage) -> Any:
        return await self.store.append_message(conversation_id, message)


_RAW_COLUMNS = "id, conversation_id, role, content, created_at, citations, debug, completed, request_id"
RAW_SCHEMA = (
    "CREATE TABLE raw_conversations (LIKE conversations INCLUDING ALL)",
    "CREATE TABLE raw_messages (LIKE messages INCLUDING ALL)",
    "ALTER TABLE raw_messages ADD FOREIGN KEY (conversation_id) REFERENCES raw_conversations (id) ON DELETE CASCADE",
)
RAW_START = f"""
    WITH conversation AS (
        INSERT INTO raw_conversations (user_id, session_id) VALUES ($1, $2)
        ON CONFLICT (user_id, session_id) DO UPDATE SET updated_at = now()
        RETURNING id
    ), inserted AS (
        INSERT INTO raw_messages (conversation_id, role, content, request_id)
        SELECT id, $3, $4, $5 FROM conversation
        RETURNING true AS new, {_RAW_COLUMNS}
    )
    SELECT * FROM inserted
    UNION ALL
    (
        SELECT false, {_RAW_COLUMNS} FROM raw_messages WHERE conversation_id = (SELECT id FROM conversation)
        ORDER BY seq DESC LIMIT $6
    )
"""
RAW_INSERT = f"""
    INSERT INTO raw_messages (conversation_id, role, content, citations, debug, completed, request_id)
    VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7)
    RETURNING {_RAW_COLUMNS}
"""


class RawTarget:
    """The least a client must send for the same turn: one statement per call, autocommit, raw Records."""

    name = "raw_asyncpg"

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    async def start(self, user_id: str, session_id: str, message: NewMessage, history_limit: int) -> Any:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                RAW_START,
                user_id,
                session_id,
                message.role.value,
                message.content,
                message.request_id,
                history_limit + 1,
            )
        new = next(row for row in rows if row["new"])
        # One row more was read, as the store's statement reads one for a replayed message; keep the limit.
        return _RawStart(new["conversation_id"], tuple(row for row in rows if not row["new"])[:history_limit])

    async def append(self, conversation_id: Any, message: NewMessage) -> Any:
        citations = json.dumps(citations_to_json(message.citations))
        debug = None if message.debug is None else dump_json(message.debug)
        async with self.pool.acquire() as conn:
            return await conn.fetchrow(
                RAW_INSERT,
                conversation_id,
                message.role.value,
                message.content,
                citations,
                debug,
                message.completed,
                message.request_id,
            )


@dataclass(frozen=True)
class _RawStart:
    conversation_id: Any
    earlier: tuple[Any, ...]


@dataclass
class Phase:
    target: str
    sessions: int
    turns: int
    wall_s: float
    cpu_s: float
    latencies_s: dict[str, list[float]] = field(default_factory=dict)


async def run_phase(target: Target, sessions: int, total_turns: int, tag: str) -> Phase:
    """`total_turns` chat turns spread over `sessions` concurrent fresh sessions."""
    per_session = max(1, round(total_turns / sessions))
    latencies: dict[str, list[float]] = {op: [] for op in OPS}

    async def timed(op: str, call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        latencies[op].append(time.perf_counter() - started)
        return result

    async def session(index: int) -> None:
        user_id, session_id = f"bench-{tag}-u{index}", f"bench-{tag}-s{index}"
        for turn in range(per_session):
            request_id = uuid.uuid4().hex
            question = NewMessage(Role.USER, USER_TEXT.format(turn=turn, session=session_id), request_id=request_id)
            started = await timed("start", target.start(user_id, session_id, question, HISTORY_LIMIT))
            if len(started.earlier) != min(2 * turn, HISTORY_LIMIT):
                raise RuntimeError(f"{target.name}: turn {turn} read {len(started.earlier)} earlier messages")
            answer = NewMessage(Role.ASSISTANT, ANSWER_TEXT, CITATIONS, debug=DEBUG, request_id=request_id)
            await timed("append", target.append(started.conversation_id, answer))

    cpu_before, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_before
    return Phase(target.name, sessions, per_session * sessions, wall, cpu, latencies)


def rotated(items: Sequence[Target], turn: int) -> list[Target]:
    shift = turn % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


@asynccontextmanager
async def open_targets(dsn: str | None, pool_max: int) -> AsyncIterator[list[Target]]:
    """postgres and raw_asyncpg on a database of their own (when there is a DSN), then sqlite."""
    with tempfile.TemporaryDirectory(prefix="history-store-") as tmp:
        sqlite = await SqliteConversationStore.open(Path(tmp) / "chat_history.db")
        try:
            if dsn is None:
                yield [StoreTarget("sqlite", sqlite)]
                return
            async with scratch_database(dsn, DATABASE) as bench_dsn:
                store = await PostgresConversationStore.open(bench_dsn, min_size=POOL_MIN, max_size=pool_max)
                try:
                    if not store.ready:
                        raise RuntimeError(f"Postgres at {describe_dsn(bench_dsn)} is not reachable")
                    pool = await asyncpg.create_pool(bench_dsn, min_size=POOL_MIN, max_size=pool_max)
                    try:
                        async with pool.acquire() as conn:
                            for statement in RAW_SCHEMA:
                                await conn.execute(statement)
                        yield [StoreTarget("postgres", store), RawTarget(pool), StoreTarget("sqlite", sqlite)]
                    finally:
                        await pool.close()
                finally:
                    await store.close()
        finally:
            await sqlite.close()


async def run(
    dsn: str | None, sessions: Sequence[int], turns: int, rounds: int, pool_max: int
) -> tuple[list[Phase], dict[str, Any] | None]:
    """The phases, and whether the Postgres connections used TLS."""
    phases: list[Phase] = []
    tls = None
    async with open_targets(dsn, pool_max) as targets:
        for target in targets:  # connections, prepared statements, caches
            await run_phase(target, 8, min(turns, 64), "warm")
        step = 0
        for round_no in range(rounds):
            for n in sessions:
                for target in rotated(targets, step):
                    phases.append(await run_phase(target, n, turns, f"r{round_no}n{n}"))
                    print(
                        f"  round {round_no + 1}/{rounds}  N={n:<3} {target.name:<12} "
                        f"{phases[-1].turns / phases[-1].wall_s:8.1f} turns/s",
                        flush=True,
                    )
                step += 1
        if dsn:
            tls = await tls_in_use(with_database(dsn, DATABASE))
    return phases, tls


# -- figures ---------------------------------------------------------------------------------------------------


def summarize(phases: Sequence[Phase]) -> dict[str, Any]:
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for name in dict.fromkeys(p.target for p in phases):
        table[name] = {}
        for n in dict.fromkeys(p.sessions for p in phases):
            mine = [p for p in phases if p.target == name and p.sessions == n]
            if not mine:
                continue
            counts = {op: len(mine[0].latencies_s[op]) for op in OPS}
            row: dict[str, Any] = {
                "rounds": len(mine),
                "turns_per_round": mine[0].turns,
                "turns_per_s": round(statistics.median(p.turns / p.wall_s for p in mine), 1),
                "appends_per_s": round(statistics.median(len(p.latencies_s["append"]) / p.wall_s for p in mine), 1),
                "turns_per_s_rounds": [round(p.turns / p.wall_s, 1) for p in mine],
                "cpu_us_per_turn": round(statistics.median(p.cpu_s / p.turns * 1e6 for p in mine), 1),
                "operations_per_round": counts,
            }
            for op in OPS:
                ms = [s * 1000 for p in mine for s in p.latencies_s[op]]
                row[f"{op}_ms"] = {
                    "p50": round(percentile(ms, 50), 3),
                    "p95": round(percentile(ms, 95), 3),
                    "p99": round(percentile(ms, 99), 3),
                    "max": round(max(ms), 3),
                }
            table[name][str(n)] = row
    ratios: dict[str, dict[str, float]] = {}
    if "postgres" in table and "raw_asyncpg" in table:
        for key, ours in table["postgres"].items():
            raw = table["raw_asyncpg"][key]
            ratios[key] = {
                "throughput_turns_per_s": ratio(ours["turns_per_s"], raw["turns_per_s"]),
                "append_p50": ratio(ours["append_ms"]["p50"], raw["append_ms"]["p50"]),
                "append_p95": ratio(ours["append_ms"]["p95"], raw["append_ms"]["p95"]),
                "start_p50": ratio(ours["start_ms"]["p50"], raw["start_ms"]["p50"]),
                "start_p95": ratio(ours["start_ms"]["p95"], raw["start_ms"]["p95"]),
                "cpu_per_turn": ratio(ours["cpu_us_per_turn"], raw["cpu_us_per_turn"]),
            }
    return {"stores": table, "postgres_over_raw": ratios}


def print_table(results: dict[str, Any], params: dict[str, Any], host: dict[str, Any]) -> None:
    print(
        f"\n{host['cpu_model']}, {host['cpus_usable']} cores, Python {host['python']}; "
        f"{params['turns_per_phase']} turns per phase x {params['rounds']} rounds, pool {params['postgres_pool']}"
    )
    tls = params["postgres_connections_tls"]
    if tls:
        print(f"Postgres connections with TLS: {tls['with_tls']} of {tls['connections']} ({tls['tls_version']})")
    print(
        f"\n{'store':<12} {'N':>3} {'turns/s':>8} {'start p50/p95 ms':>17} {'append p50/p95 ms':>18} "
        f"{'CPU µs/turn':>12}"
    )
    stores = results["stores"]
    for n in params["sessions"]:
        for name, rows in stores.items():
            row = rows.get(str(n))
            if row is None:
                continue
            st, a = row["start_ms"], row["append_ms"]
            print(
                f"{name:<12} {n:>3} {row['turns_per_s']:>8.1f} {st['p50']:>7.2f} / {st['p95']:<7.2f} "
                f"{a['p50']:>8.2f} / {a['p95']:<7.2f} {row['cpu_us_per_turn']:>12.0f}"
            )
    ratios = results["postgres_over_raw"]
    if ratios:
        print("\npostgres / raw asyncpg   throughput (turns/s)   start p50  p95   append p50  p95   CPU/turn")
        for n, r in ratios.items():
            print(
                f"  N={n:<20} {r['throughput_turns_per_s']:>14.2f} {r['start_p50']:>12.2f} {r['start_p95']:>5.2f} "
                f"{r['append_p50']:>10.2f} {r['append_p95']:>5.2f} {r['cpu_per_turn']:>10.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"fewer turns and rounds: {QUICK}")
    parser.add_argument(
        "--sessions", help=f"concurrent sessions per phase, comma-separated (default {FULL['sessions']})"
    )
    parser.add_argument("--turns", type=int, help=f"turns per phase, split over its sessions (default {FULL['turns']})")
    parser.add_argument("--rounds", type=int, help=f"(default {FULL['rounds']})")
    parser.add_argument("--pool-max", type=int, default=POOL_MAX, help="Postgres pool size, both targets")
    parser.add_argument("--dsn", default=os.environ.get("POSTGRES_TEST_DSN"), help="default: $POSTGRES_TEST_DSN")
    parser.add_argument("--output", type=Path, default=None, help="default: results/<name>.json (or _quick.json)")
    args = parser.parse_args()
    preset = QUICK if args.quick else FULL
    sessions = [int(s) for s in str(args.sessions or preset["sessions"]).split(",")]
    turns = int(args.turns or preset["turns"])
    rounds = int(args.rounds or preset["rounds"])
    if not args.dsn:
        print('no --dsn and no POSTGRES_TEST_DSN: SQLite only (eval "$(scripts/services/postgres.sh)" first)')
    host = machine()
    started = datetime.now(UTC)
    phases, tls = asyncio.run(run(args.dsn or None, sessions, turns, rounds, args.pool_max))
    host["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    params = {
        "quick": args.quick,
        "sessions": sessions,
        "turns_per_phase": turns,
        "rounds": rounds,
        "history_limit": HISTORY_LIMIT,
        "postgres_pool": f"{POOL_MIN}..{args.pool_max}" if args.dsn else None,
        "postgres": describe_dsn(with_database(args.dsn, DATABASE)) if args.dsn else None,
        "postgres_connections_tls": tls,
        "sqlite": f"a file in a temp dir under {tempfile.gettempdir()}",
        "answer_chars": len(ANSWER_TEXT),
        "citations_per_answer": len(CITATIONS),
    }
    results = summarize(phases)
    results["duration_s"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    print_table(results, params, host)
    save_result(
        args.output or result_path("history_store", args.quick), "history_store", host, started, params, results
    )


if __name__ == "__main__":
    main()
