"""Ingestion jobs when a process dies with `kill -9` mid-job: the serving process's worker, and the serving process
itself (its worker then stops on its own), with either job store (SQLite, and Postgres with the procrastinate
queue) and either graph store (the embedded file, and the real Neo4j server of tests/support/neo4j.py). The job
resumes and ends `done`; every document is in the KB once, with all its chunks, and nothing of a document is left
without it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import httpx
import pytest
from neo4j import AsyncGraphDatabase

from tests.faults.helpers import poll
from tests.support.live_server import SAMPLE_REGISTRY, live_server, make_settings
from tests.support.neo4j import Neo4jServer, emptied
from tests.support.serve_process import ServeProcess

pytestmark = pytest.mark.slow

KB = "harbour"
DOCUMENTS = 120
JOB_SETTINGS = {"JOB_BATCH_DOCUMENTS": "5", "JOB_STALE_AFTER_S": "1"}

# What is left of a document without it, in either graph store: chunks without their document, documents whose
# chunk_count is not their chunks', and strays — mentions and relations that name a chunk that is gone, and
# entities no chunk mentions any more.
Leftovers = tuple[int, int, int]


@dataclass(frozen=True)
class Graph:
    settings: dict[str, str]
    leftovers: Callable[[], Awaitable[Leftovers]]


def stores(neo4j_job_store: str) -> pytest.MarkDecorator:
    """A test's (job store, graph store) cases: both job stores on the embedded graph store, one on Neo4j. A batch
    is handed back and written again the same way whatever the graph store, so each job store meets Neo4j in one of
    the two tests (six slow cases rather than eight)."""
    cases = [("sqlite", "embedded"), ("postgres", "embedded"), (neo4j_job_store, "neo4j")]
    return pytest.mark.parametrize(
        ("job_store", "graph"),
        [
            pytest.param(jobs, graph, id=f"{jobs}-{graph}", marks=[pytest.mark.postgres] if jobs == "postgres" else [])
            for jobs, graph in cases
        ],
        indirect=True,
    )


@pytest.fixture
def job_store(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings for the job store (Postgres: a fresh schema on the real server, the conversations there too)."""
    if request.param == "postgres":
        return {"JOB_STORE": "postgres", "POSTGRES_DSN": request.getfixturevalue("isolated_postgres_dsn")}
    return {"JOB_STORE": "sqlite"}


@pytest.fixture
async def graph(request: pytest.FixtureRequest, data_dir: Path) -> Graph:
    """Settings for the graph store, and how to count what a document left behind (Neo4j: emptied first)."""
    if request.param == "embedded":
        return Graph({"GRAPH_STORE": "embedded"}, lambda: embedded_leftovers(data_dir))
    neo4j: Neo4jServer = request.getfixturevalue("neo4j_server")
    return Graph(await emptied(neo4j), lambda: neo4j_leftovers(neo4j))


_EMBEDDED_ORPHANS = """SELECT count(*) FROM chunks AS c WHERE c.kb = :kb AND NOT EXISTS
    (SELECT 1 FROM documents AS d WHERE d.kb = c.kb AND d.doc_id = c.doc_id)"""
_EMBEDDED_MISCOUNTED = """SELECT count(*) FROM documents AS d WHERE d.kb = :kb AND d.chunk_count !=
    (SELECT count(*) FROM chunks AS c WHERE c.kb = d.kb AND c.doc_id = d.doc_id)"""
_EMBEDDED_STRAYS = """SELECT
    (SELECT count(*) FROM entity_mentions AS m WHERE m.kb = :kb AND NOT EXISTS
        (SELECT 1 FROM chunks AS c WHERE c.kb = m.kb AND c.chunk_id = m.chunk_id))
    + (SELECT count(*) FROM relation_mentions AS m WHERE m.kb = :kb AND NOT EXISTS
        (SELECT 1 FROM chunks AS c WHERE c.kb = m.kb AND c.chunk_id = m.chunk_id))
    + (SELECT count(*) FROM relations AS r WHERE r.kb = :kb AND EXISTS
        (SELECT 1 FROM json_each(r.chunk_ids) AS j WHERE NOT EXISTS
            (SELECT 1 FROM chunks AS c WHERE c.kb = r.kb AND c.chunk_id = j.value)))
    + (SELECT count(*) FROM entities AS e WHERE e.kb = :kb AND NOT EXISTS
        (SELECT 1 FROM entity_mentions AS m WHERE m.kb = e.kb AND m.entity_id = e.entity_id))"""


async def embedded_leftovers(data_dir: Path) -> Leftovers:
    with sqlite3.connect(f"file:{data_dir / 'graph.db'}?mode=ro", uri=True) as graph:
        orphans, miscounted, strays = (
            int(graph.execute(query, {"kb": KB}).fetchone()[0])
            for query in (_EMBEDDED_ORPHANS, _EMBEDDED_MISCOUNTED, _EMBEDDED_STRAYS)
        )
    return orphans, miscounted, strays


# backend/infrastructure/graph_store/neo4j/queries.py: (:Chunk)-[:PART_OF]->(:Document), (:Chunk)-[:MENTIONS]->
# (:Entity), (:Entity)-[:RELATED {chunk_ids}]->(:Entity), and (:RelationMention {chunk_id}). A MENTIONS link goes
# with its chunk; an entity it leaves unmentioned, a relation mention and a RELATED chunk id can stay behind.
_NEO4J_ORPHANS: LiteralString = """
MATCH (c:Chunk {kb: $kb})
WHERE NOT EXISTS { MATCH (c)-[:PART_OF]->(d:Document {kb: $kb}) WHERE d.id = c.doc_id }
RETURN count(c) AS n"""
_NEO4J_MISCOUNTED: LiteralString = """
MATCH (d:Document {kb: $kb})
WHERE d.chunk_count <> COUNT { MATCH (d)<-[:PART_OF]-(:Chunk) }
RETURN count(d) AS n"""
_NEO4J_STRAYS: LiteralString = """
OPTIONAL MATCH (c:Chunk {kb: $kb})
WITH collect(c.id) AS chunks
RETURN COUNT { MATCH (m:RelationMention {kb: $kb}) WHERE NOT m.chunk_id IN chunks }
    + COUNT { MATCH (:Entity {kb: $kb})-[r:RELATED]->(:Entity) WHERE any(id IN r.chunk_ids WHERE NOT id IN chunks) }
    + COUNT { MATCH (e:Entity {kb: $kb}) WHERE NOT EXISTS { MATCH (:Chunk)-[:MENTIONS]->(e) } } AS n"""


async def neo4j_leftovers(server: Neo4jServer) -> Leftovers:
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        counts = []
        for query in (_NEO4J_ORPHANS, _NEO4J_MISCOUNTED, _NEO4J_STRAYS):
            records, _, _ = await driver.execute_query(query, {"kb": KB})
            counts.append(int(records[0]["n"]))
    orphans, miscounted, strays = counts
    return orphans, miscounted, strays


def documents() -> list[dict[str, str]]:
    return [
        {
            "title": f"Harbour log {n}",
            "text": f"On day {n} the ferry Marigold{n} left Porthkennack at {n % 24}:00 carrying {n * 3} crates of "
            f"slate for the quarry of Tregarth{n % 7}. The harbour master, Jenna Pascoe, logged the tide.",
            "source": f"logs/{n}.txt",
        }
        for n in range(DOCUMENTS)
    ]


async def start_job(http: httpx.AsyncClient) -> str:
    created = await http.post("/api/v1/kbs", json={"kb_prefix": KB, "description": "harbour logs"})
    assert created.status_code == 201, created.text
    accepted = await http.post(f"/api/v1/kbs/{KB}/documents", json={"documents": documents()})
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["job_id"])


async def job(http: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def until(http: httpx.AsyncClient, job_id: str, done: Any, within_s: float) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        record = await job(http, job_id)
        return record if done(record) else None

    return await poll(check, within_s, f"job {job_id}")


def mid_job(record: dict[str, Any]) -> bool:
    return 0 < record["processed"] < DOCUMENTS // 2


def over(record: dict[str, Any]) -> bool:
    return record["status"] in ("done", "failed", "cancelled")


async def assert_whole(http: httpx.AsyncClient, job_id: str, graph: Graph) -> tuple[dict[str, Any], int]:
    """The job is done with every document once, and the graph holds each whole; the job and the KB's documents."""
    record = await job(http, job_id)
    counts = record["counts"]
    assert (record["status"], record["processed"], counts["documents_failed"]) == ("done", DOCUMENTS, 0), record
    # A batch its worker indexed but could not record is indexed again: unchanged, never twice.
    assert counts["documents_added"] + counts["documents_unchanged"] == DOCUMENTS
    listed = (await http.get(f"/api/v1/jobs/{job_id}?documents=true&limit=1000")).json()["documents"]
    assert {d["status"] for d in listed} == {"done"}
    stored = (await http.get(f"/api/v1/kbs/{KB}/documents")).json()["documents"]
    assert len(stored) == DOCUMENTS == len({d["doc_id"] for d in stored})
    assert {d["doc_id"] for d in stored} == {d["doc_id"] for d in listed}
    assert await graph.leftovers() == (0, 0, 0)
    return record, len(stored)


def report(fault_report: Any, fault: str, injected: str, killed_at: int, record: dict[str, Any], stored: int) -> None:
    counts = record["counts"]
    fault_report(
        fault,
        injected,
        requests=1,  # the ingestion request; the store owes its documents
        messages_expected=DOCUMENTS,
        messages_stored=stored,
        outcomes=[f"202, job {record['status']}"],
        notes=f"killed at {killed_at} of {DOCUMENTS} documents processed; added {counts['documents_added']}, "
        f"unchanged (indexed before the kill, not recorded) {counts['documents_unchanged']}; "
        "nothing orphaned, duplicated or miscounted",
    )


def ingestion_workers() -> list[multiprocessing.Process]:
    return [child for child in multiprocessing.active_children() if child.name == "ingestion-worker"]


@stores(neo4j_job_store="sqlite")
async def test_a_worker_killed_mid_job_is_replaced_and_the_job_finishes_whole(
    data_dir: Path, job_store: dict[str, str], graph: Graph, fault_report: Any
) -> None:
    settings = make_settings(data_dir, **JOB_SETTINGS, **job_store, **graph.settings)
    with live_server(settings) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            job_id = await start_job(http)
            killed_at = (await until(http, job_id, mid_job, within_s=90))["processed"]
            [worker] = ingestion_workers()
            os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]  # a started process has a pid

            await until(http, job_id, over, within_s=180)
            replaced = [child.pid for child in ingestion_workers()]
            assert replaced and worker.pid not in replaced
            record, stored = await assert_whole(http, job_id, graph)
    stores_used = f"{job_store['JOB_STORE']} jobs, {graph.settings['GRAPH_STORE']} graph"
    injected = f"SIGKILL to the serving process's worker mid-job ({stores_used}); the serving process starts another"
    report(fault_report, "Ingestion worker killed mid-job", injected, killed_at, record, stored)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@stores(neo4j_job_store="postgres")  # how a scaled-out deployment runs: Postgres and Neo4j
async def test_the_serving_process_killed_mid_job_resumes_it_after_a_restart(
    data_dir: Path, tmp_path: Path, job_store: dict[str, str], graph: Graph, fault_report: Any
) -> None:
    env = {
        "DATA_DIR": str(data_dir),
        "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY),
        "AUTH_MODE": "none",
        "EXTRACTOR": "offline",
        **JOB_SETTINGS,
        **job_store,
        **graph.settings,
    }
    with ServeProcess(env, tmp_path) as first:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
            job_id = await start_job(http)
            killed_at = (await until(http, job_id, mid_job, within_s=90))["processed"]
            workers = children_of(first.process.pid)
            assert workers, first.log()
            first.send(signal.SIGKILL)
            first.wait(10)

    # Its worker sees that the serving process is gone, hands back the batch it holds and exits.
    async def stopped() -> bool | None:
        return True if not any(alive(pid) for pid in workers) else None

    await poll(stopped, within_s=15, what="the orphaned worker stops")

    with ServeProcess(env, tmp_path) as second:
        async with httpx.AsyncClient(base_url=second.base_url, timeout=60) as http:
            assert (await job(http, job_id))["status"] in ("queued", "running")
            await until(http, job_id, over, within_s=180)
            record, stored = await assert_whole(http, job_id, graph)
    stores_used = f"{job_store['JOB_STORE']} jobs, {graph.settings['GRAPH_STORE']} graph"
    injected = f"SIGKILL to `python -m backend serve` mid-job ({stores_used}); its worker stops; serve started again"
    report(fault_report, "Serving process killed mid-job, restarted", injected, killed_at, record, stored)
