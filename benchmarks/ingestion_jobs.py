"""Ingestion as jobs, through the API: chat while 2,000 passages are ingested, and indexing throughput with one
and two workers and with the model extractor.

Passages: the first `--passages` of the 2wiki corpus (../shared/datasets/2wiki/corpus.json; default 2,000,
`--quick` 400), each one document (title, text), sent as `POST /api/v1/kbs/{kb}/documents` requests of at most
1,000 documents (the API's cap per request); each request is answered 202 with its job.

Part `serving` (goal: chat first-token p99 during the ingestion within GOAL_INGEST_TTFT_RATIO of idle, same run).
`python -m backend serve` as `scripts/run.sh` runs it (tests.support.serve_process.ServeProcess): embedded stores,
the offline extractor, no chat model (extractive answers), AUTH_MODE=none, the sample registry
(config/kb_registry.toml) with its orchard KB indexed first by `python -m backend ingest-registry`. The serving
process starts its own worker process when the first job comes (SERVE_WORKER's default), so the worker's start is
part of the busy phase. The client (this process) streams chat turns to the orchard KB one at a time, the orchard
questions of benchmarks/data/answers.json in turn, each in a fresh session; first-token time = from just before
the POST to the first `token` frame. A turn starts every `--interval` seconds (0.25; at once when the one before
took longer): a user reading answers, not a client that saturates the machine. Phases: a warm-up (not counted);
idle; busy (the passages are submitted to a new KB `wiki`, and turns go on until every job is over and the worker
is quiet again: the KB's community refresh runs after its job is done; each submission's 202 latency and the jobs'
progress every second are recorded); idle again. Idle = both idle phases pooled, so drift over the run hits both
sides. Reported: p50/p95/p99/max per phase, the busy/idle p99 ratio, the jobs' wall time, documents/s, status and
counts.

Part `throughput`: `python -m backend serve` with SERVE_WORKER=false and N `python -m backend worker` processes
(started and ready before the passages are submitted), a fresh data folder and KB per case. Setups: `embedded`
(the SQLite job store, the embedded graph store) and, when NEO4J_TEST_URI and a Postgres DSN (--dsn or
POSTGRES_TEST_DSN) are given, `neo4j` (the Postgres job store queued by procrastinate, on a scratch database
`bench_ingestion_jobs` created and dropped here; the Neo4j graph store). Cases: the offline extractor with 1 and
2 workers on the first `--throughput-passages` (default 1,000, quick 200); the model extractor (EXTRACTOR=llm,
benchmarks.extraction_model answering after 200 ms per call) on the first `--llm-passages` (default 200, quick
60) with EXTRACTION_CONCURRENCY 4 and 16 on one worker and 16 on two, on the embedded setup. Throughput =
documents / (the last job's finished_at - the first job's started_at), from the job records (a job is done before
its community refresh); the time from the first submission to the last job's end is reported too. Each case
checks that no document was indexed twice: added = passages, none unchanged or failed, and the KB lists each
document once. Per worker: its CPU seconds (how the work was shared). Model cases: calls by kind per chunk and
prompt and answer characters per document, from the model process.

Run:  python -m benchmarks.ingestion_jobs [--quick] [--parts serving,throughput] [--passages 2000]
Writes benchmarks/results/ingestion_jobs.json (`--quick`: ingestion_jobs_quick.json) and prints tables. The machine
is shared (2 cores here: server, worker and client compete): compare figures of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from backend.server.models.knowledge import MAX_DOCUMENTS_PER_REQUEST
from benchmarks.goals import GOAL_INGEST_TTFT_RATIO
from benchmarks.graph_indexing import EMBEDDING_DIMENSION, Neo4jTarget, prepare_neo4j
from benchmarks.graph_probes import machine, percentile, ratio
from benchmarks.history_store import scratch_database
from benchmarks.quality_data import DATASETS
from tests.support.live_server import SAMPLE_REGISTRY
from tests.support.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
J = dict[str, Any]
QUESTIONS = ROOT / "benchmarks" / "data" / "answers.json"
CHAT_KB, INGEST_KB = "orchard", "wiki"
MODEL_DELAY_S = 0.2
JOB_OVER = ("done", "failed", "cancelled")
BASE_ENV = {"AUTH_MODE": "none", "GRAPH_STORE": "embedded", "EXTRACTOR": "offline", "LOG_LEVEL": "INFO"}


def load_passages(count: int) -> list[dict[str, str]]:
    corpus = json.loads((DATASETS / "2wiki" / "corpus.json").read_text(encoding="utf-8"))[:count]
    return [{"title": p["title"], "text": p["text"], "source": f"2wiki/{i}"} for i, p in enumerate(corpus)]


def timings(values_ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values_ms),
        **{f"p{q}": round(percentile(values_ms, q), 1) for q in (50, 95, 99)},
        "max": round(max(values_ms), 1) if values_ms else float("nan"),
    }


def stamp(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


# -- talking to the server ------------------------------------------------------------------------------------


async def first_token_ms(http: httpx.AsyncClient, question: str) -> float:
    """One chat turn in a fresh session, read to its end; the time to its first `token` frame."""
    body = {"session_id": uuid.uuid4().hex, "message": question, "kb_prefix": CHAT_KB, "user_id": "bench"}
    first: float | None = None
    start = time.perf_counter()
    async with http.stream("POST", "/api/v1/chat/stream", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"chat turn: HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: ") and json.loads(line[6:]).get("status") == "token":
                first = time.perf_counter()
    if first is None:
        raise RuntimeError(f"chat turn without a token: {question!r}")
    return (first - start) * 1000


async def submit(http: httpx.AsyncClient, kb: str, passages: Sequence[dict[str, str]]) -> tuple[list[str], list[float]]:
    """Create the KB, send the passages; the job ids and each request's latency (ms)."""
    created = await http.post("/api/v1/kbs", json={"kb_prefix": kb, "description": "2wiki passages"})
    if created.status_code != 201:
        raise RuntimeError(f"create {kb}: HTTP {created.status_code}: {created.text[:300]}")
    jobs, latencies = [], []
    for start in range(0, len(passages), MAX_DOCUMENTS_PER_REQUEST):
        batch = passages[start : start + MAX_DOCUMENTS_PER_REQUEST]
        sent = time.perf_counter()
        accepted = await http.post(f"/api/v1/kbs/{kb}/documents", json={"documents": batch}, timeout=120)
        latencies.append(round((time.perf_counter() - sent) * 1000, 1))
        if accepted.status_code != 202:
            raise RuntimeError(f"ingest: HTTP {accepted.status_code}: {accepted.text[:300]}")
        jobs.append(str(accepted.json()["job_id"]))
    return jobs, latencies


async def job_records(http: httpx.AsyncClient, job_ids: Sequence[str]) -> list[dict[str, Any]]:
    records = []
    for job_id in job_ids:
        response = await http.get(f"/api/v1/jobs/{job_id}")
        response.raise_for_status()
        records.append(dict(response.json()))
    return records


async def follow(http: httpx.AsyncClient, job_ids: Sequence[str], started: float) -> list[dict[str, Any]]:
    """The jobs' progress every second until all are over: (seconds since `started`, documents processed)."""
    progress = []
    while True:
        records = await job_records(http, job_ids)
        processed = sum(r["processed"] for r in records)
        progress.append({"s": round(time.perf_counter() - started, 1), "processed": processed})
        if all(r["status"] in JOB_OVER for r in records):
            return progress
        await asyncio.sleep(1.0)


def job_summary(records: Sequence[dict[str, Any]], documents: int) -> dict[str, Any]:
    """Status and counts of the jobs, and throughput from their records (first start to last end)."""
    counts: dict[str, int] = {}
    for record in records:
        for key, value in record["counts"].items():
            counts[key] = counts.get(key, 0) + int(value)
    starts = [stamp(r["started_at"]) for r in records if r["started_at"]]
    ends = [stamp(r["finished_at"]) for r in records if r["finished_at"]]
    working_s = max(ends) - min(starts) if starts and ends else float("nan")
    return {
        "statuses": sorted({r["status"] for r in records}),
        "errors": [r["error"] for r in records if r["error"]],
        "counts": counts,
        "queued_s": round(min(starts) - min(stamp(r["created_at"]) for r in records), 2) if starts else None,
        "working_s": round(working_s, 2),
        "documents_per_s": round(documents / working_s, 1) if working_s == working_s and working_s else None,
    }


async def kb_documents(http: httpx.AsyncClient, kb: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v1/kbs/{kb}/documents")
    response.raise_for_status()
    return list(response.json()["documents"])


# -- processes -----------------------------------------------------------------------------------------------


def run_cli(args: Sequence[str], env: dict[str, str], workdir: Path) -> None:
    base = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR", "HF_HOME") if name in os.environ}
    full = base | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"} | env
    subprocess.run([sys.executable, "-m", "backend", *args], cwd=workdir, env=full, check=True, capture_output=True)


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def workers(count: int, env: dict[str, str], workdir: Path) -> Iterator[list[Worker]]:
    """`python -m backend worker` processes, each taking batches (its log says so) before this yields."""
    base = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR", "HF_HOME") if name in os.environ}
    full = base | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"} | env
    started: list[Worker] = []
    try:
        for n in range(count):
            log = workdir / f"worker-{n}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "backend", "worker"], cwd=workdir, env=full, stdout=out, stderr=out
                )
            started.append(Worker(process, log))
        deadline = time.monotonic() + 120
        while not all("is taking batches" in w.log.read_text(errors="replace") for w in started):
            if any(w.process.poll() is not None for w in started) or time.monotonic() > deadline:
                raise RuntimeError("a worker did not start:\n" + "\n".join(w.log.read_text()[-2000:] for w in started))
            time.sleep(0.2)
        yield started
    finally:
        for worker in started:
            worker.process.terminate()
        for worker in started:
            try:
                worker.process.wait(30)
            except subprocess.TimeoutExpired:
                worker.process.kill()


@contextmanager
def extraction_model(workdir: Path, name: str) -> Iterator[tuple[str, Path]]:
    """benchmarks.extraction_model at MODEL_DELAY_S per call: its URL, and where its call counts are written."""
    stats = workdir / f"{name}-calls.json"
    command = [sys.executable, "-m", "benchmarks.extraction_model", "--port", "0", "--delay", str(MODEL_DELAY_S)]
    process = subprocess.Popen([*command, "--stats", str(stats)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    try:
        if not line.startswith("READY "):
            raise RuntimeError(f"the extraction model did not start: {line!r}")
        yield line.removeprefix("READY "), stats
    finally:
        process.terminate()
        process.wait(15)


# -- part 1: chat while a job runs ---------------------------------------------------------------------------


class Chat:
    """Chat turns one at a time, one starting every `interval_s` (at once when the last took longer): a user
    who reads the answer, not a client that saturates the machine."""

    def __init__(self, http: httpx.AsyncClient, questions: Sequence[str], interval_s: float) -> None:
        self._http, self._questions, self._interval_s = http, questions, interval_s
        self._sent = 0

    async def turn(self) -> float:
        started = time.perf_counter()
        ms = await first_token_ms(self._http, self._questions[self._sent % len(self._questions)])
        self._sent += 1
        await asyncio.sleep(max(0.0, self._interval_s - (time.perf_counter() - started)))
        return ms

    async def phase(self, turns: int) -> list[float]:
        return [await self.turn() for _ in range(turns)]


def children_cpu_s(pid: int) -> float:
    """CPU seconds of the processes whose parent is `pid` (the serving process's worker)."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            if int(fields[1]) == pid:
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def ingesting(http: httpx.AsyncClient, job_ids: Sequence[str], started: float, server_pid: int) -> J:
    """The jobs' progress until they are over, then until the worker is quiet (the KB's community refresh runs
    after its job is done): under 0.05 CPU seconds in a second."""
    progress = await follow(http, job_ids, started)
    over = time.perf_counter()
    before = children_cpu_s(server_pid)
    while True:
        await asyncio.sleep(1.0)
        now = children_cpu_s(server_pid)
        if now - before < 0.05:
            return {"progress": progress, "worker_busy_after_done_s": round(time.perf_counter() - over - 1.0, 1)}
        before = now


async def serving(passages: list[dict[str, str]], turns: int, interval_s: float) -> dict[str, Any]:
    questions = [q["question"] for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))["orchard"]]
    with tempfile.TemporaryDirectory(prefix="ingestion-jobs-") as tmp:
        work = Path(tmp)
        env = BASE_ENV | {"DATA_DIR": str(work / "data"), "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY)}
        run_cli(["ingest-registry"], env, ROOT)  # the registry's sources are relative to its folder
        with ServeProcess(env, work) as server:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as http:
                chat = Chat(http, questions, interval_s)
                await chat.phase(20)
                idle_before = await chat.phase(turns)
                started = time.perf_counter()
                job_ids, accepted_ms = await submit(http, INGEST_KB, passages)
                following = asyncio.create_task(ingesting(http, job_ids, started, server.process.pid))
                busy: list[float] = []
                while not following.done():
                    busy.append(await chat.turn())
                ingested = await following
                wall_s = time.perf_counter() - started
                idle_after = await chat.phase(turns)
                records = await job_records(http, job_ids)
                listed = await kb_documents(http, INGEST_KB)
    idle = idle_before + idle_after
    return {
        "passages": len(passages),
        "requests_202_ms": accepted_ms,
        "jobs": job_summary(records, len(passages)),
        "submitted_to_done_s": round(wall_s, 1),
        "kb_documents": len(listed),
        "kb_documents_distinct": len({d["doc_id"] for d in listed}),
        **ingested,
        "first_token_ms": {
            "idle": timings(idle),
            "idle_before": timings(idle_before),
            "idle_after": timings(idle_after),
            "busy": timings(busy),
        },
        "busy_over_idle_p99": ratio(percentile(busy, 99), percentile(idle, 99)),
    }


# -- part 2: throughput --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    setup: str  # embedded | neo4j
    extractor: str  # offline | llm
    workers: int
    concurrency: int | None = None  # EXTRACTION_CONCURRENCY, model cases

    @property
    def name(self) -> str:
        extractor = self.extractor if self.concurrency is None else f"llm_200ms_c{self.concurrency}"
        return f"{self.setup}/{extractor}/{self.workers}w"

    @property
    def kb(self) -> str:
        return f"bench_{self.setup}_{self.extractor}_{self.workers}w{self.concurrency or ''}"


async def measure(case: Case, passages: list[dict[str, str]], env: dict[str, str], work: Path) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        model_stats: Path | None = None
        if case.extractor == "llm":
            url, model_stats = stack.enter_context(extraction_model(work, case.kb))
            env = env | {
                "EXTRACTOR": "llm",
                "LLM_BASE_URL": url,
                "LLM_MODEL": "scripted-extractor",
                "LLM_API_KEY": "bench",
                "EXTRACTION_CONCURRENCY": str(case.concurrency),
            }
        started_workers = stack.enter_context(workers(case.workers, env, work))
        server = stack.enter_context(ServeProcess(env, work))
        http = await stack.enter_async_context(httpx.AsyncClient(base_url=server.base_url, timeout=120))
        cpu_before = [w.cpu_s() for w in started_workers]
        started = time.perf_counter()
        job_ids, accepted_ms = await submit(http, case.kb, passages)
        await follow(http, job_ids, started)
        wall_s = time.perf_counter() - started
        cpu = [round(w.cpu_s() - before, 1) for w, before in zip(started_workers, cpu_before, strict=True)]
        records = await job_records(http, job_ids)
        listed = await kb_documents(http, case.kb)
    summary = job_summary(records, len(passages))
    counts = summary["counts"]
    distinct = {d["doc_id"] for d in listed}
    chunks = sum(int(d["chunk_count"]) for d in listed)
    result = {
        "case": case.name,
        "passages": len(passages),
        "requests_202_ms": accepted_ms,
        **summary,
        "submitted_to_done_s": round(wall_s, 1),
        "worker_cpu_s": cpu,
        "kb_documents": len(listed),
        "chunks": chunks,
        "none_twice": counts.get("documents_added") == len(passages) == len(distinct) == len(listed)
        and not counts.get("documents_unchanged")
        and not counts.get("documents_failed"),
    }
    if model_stats is not None and model_stats.exists():
        stats = json.loads(model_stats.read_text())
        result["model_calls"] = stats.get("calls", {})
        result["model_calls_per_chunk"] = round(stats.get("total_calls", 0) / max(1, chunks), 2)
        for side in ("prompt", "answer"):  # what a priced model would bill, per document
            result[f"model_{side}_chars_per_document"] = round(stats.get(f"total_{side}_chars", 0) / len(passages))
    return result


async def throughput(args: argparse.Namespace) -> dict[str, Any]:
    offline = load_passages(args.throughput_passages)
    llm = load_passages(args.llm_passages)
    neo4j = Neo4jTarget.from_env()
    dsn = args.dsn or os.environ.get("POSTGRES_TEST_DSN")
    cases = [Case("embedded", "offline", 1), Case("embedded", "offline", 2)]
    cases += [Case("embedded", "llm", 1, 4), Case("embedded", "llm", 1, 16), Case("embedded", "llm", 2, 16)]
    results: dict[str, Any] = {"skipped": {}}
    async with AsyncExitStack() as stack:
        setups = {"embedded": {"JOB_STORE": "sqlite"}}
        if neo4j is not None and dsn:
            on_neo4j = [Case("neo4j", "offline", 1), Case("neo4j", "offline", 2)]
            database = await stack.enter_async_context(scratch_database(dsn, "bench_ingestion_jobs"))
            await prepare_neo4j(neo4j, EMBEDDING_DIMENSION, [case.kb for case in on_neo4j])
            setups["neo4j"] = {
                "JOB_STORE": "postgres",
                "POSTGRES_DSN": database,
                "GRAPH_STORE": "neo4j",
                "NEO4J_URI": neo4j.uri,
                "NEO4J_USER": neo4j.user,
                "NEO4J_PASSWORD": neo4j.password,
            }
            cases[2:2] = on_neo4j
        else:
            results["skipped"]["neo4j"] = "needs NEO4J_TEST_URI and a Postgres DSN (--dsn or POSTGRES_TEST_DSN)"
        for case in cases:
            with tempfile.TemporaryDirectory(prefix="ingestion-jobs-") as tmp:
                work = Path(tmp)
                registry = work / "kb_registry.toml"
                registry.write_text("# no knowledge bases: each case creates its own\n")
                env = BASE_ENV | setups[case.setup] | {"DATA_DIR": str(work), "KB_REGISTRY_PATH": str(registry)}
                env |= {"SERVE_WORKER": "false"}
                print(f"  {case.name} ...", file=sys.stderr, flush=True)
                results[case.name] = await measure(case, llm if case.extractor == "llm" else offline, env, work)
    return results


# -- output ----------------------------------------------------------------------------------------------------


def print_tables(document: dict[str, Any]) -> None:
    serving_part = document.get("serving")
    if serving_part:
        ttft = serving_part["first_token_ms"]
        print(f"\nChat first token (ms) while {serving_part['passages']} passages are ingested through the API")
        print(f"{'phase':<12}{'n':>6}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
        for phase in ("idle", "busy"):
            t = ttft[phase]
            print(f"{phase:<12}{t['n']:>6}{t['p50']:>9}{t['p95']:>9}{t['p99']:>9}{t['max']:>9}")
        jobs = serving_part["jobs"]
        print(
            f"p99 busy/idle {serving_part['busy_over_idle_p99']} (goal <= {GOAL_INGEST_TTFT_RATIO}); 202 in "
            f"{serving_part['requests_202_ms']} ms; jobs {jobs['statuses']} in {jobs['working_s']} s "
            f"({jobs['documents_per_s']} documents/s), submitted to done {serving_part['submitted_to_done_s']} s"
        )
    cases = {k: v for k, v in (document.get("throughput") or {}).items() if k != "skipped"}
    if cases:
        print(f"\n{'case':<30}{'docs':>6}{'docs/s':>9}{'work s':>9}{'wall s':>9}  worker CPU s   none twice")
        for name, r in cases.items():
            print(
                f"{name:<30}{r['passages']:>6}{r['documents_per_s']!s:>9}{r['working_s']!s:>9}"
                f"{r['submitted_to_done_s']!s:>9}  {r['worker_cpu_s']!s:<14}{r['none_twice']}"
            )
        for name, why in (document["throughput"].get("skipped") or {}).items():
            print(f"{name}: skipped ({why})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", default="serving,throughput")
    parser.add_argument("--passages", type=int, help="serving: passages ingested (default 2000, quick 400)")
    parser.add_argument("--turns", type=int, help="serving: chat turns per idle phase (default 200, quick 50)")
    parser.add_argument("--interval", type=float, default=0.25, help="serving: seconds from turn to turn")
    parser.add_argument("--throughput-passages", type=int, help="offline cases (default 1000, quick 200)")
    parser.add_argument("--llm-passages", type=int, help="model extractor cases (default 200, quick 60)")
    parser.add_argument("--dsn", help="Postgres for the neo4j setup's job store (default POSTGRES_TEST_DSN)")
    args = parser.parse_args()
    quick = args.quick
    args.passages = args.passages or (400 if quick else 2000)
    args.turns = args.turns or (50 if quick else 200)
    args.throughput_passages = args.throughput_passages or (200 if quick else 1000)
    args.llm_passages = args.llm_passages or (60 if quick else 200)
    parts = set(args.parts.split(","))
    output = RESULTS / ("ingestion_jobs_quick.json" if quick else "ingestion_jobs.json")
    document: dict[str, Any] = {
        "benchmark": "ingestion_jobs",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "parameters": {k: v for k, v in vars(args).items() if k != "dsn"},
    }
    if output.exists():  # a run of one part keeps the other's figures
        kept = json.loads(output.read_text(encoding="utf-8"))
        document |= {part: kept[part] for part in ("serving", "throughput") if part in kept and part not in parts}
    if "serving" in parts:
        document["serving"] = asyncio.run(serving(load_passages(args.passages), args.turns, args.interval))
    if "throughput" in parts:
        document["throughput"] = asyncio.run(throughput(args))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print_tables(document)


if __name__ == "__main__":
    main()
