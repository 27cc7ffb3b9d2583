"""Ingestion jobs when a process dies with `kill -9` mid-job: the serving process's worker, and the serving process
itself (its worker then stops on its own), with either job store (SQLite, and Postgres with the procrastinate
queue). The job resumes and ends `done`; every document is in the KB once, with all its chunks, and nothing of a
document is left without it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.helpers import poll
from tests.support.live_server import SAMPLE_REGISTRY, live_server, make_settings
from tests.support.serve_process import ServeProcess

pytestmark = pytest.mark.slow

DOCUMENTS = 120
JOB_SETTINGS = {"JOB_BATCH_DOCUMENTS": "5", "JOB_STALE_AFTER_S": "1"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def job_store(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings for each job store (Postgres: a fresh schema on the real server, the conversations there too)."""
    if request.param == "postgres":
        return {"JOB_STORE": "postgres", "POSTGRES_DSN": request.getfixturevalue("isolated_postgres_dsn")}
    return {"JOB_STORE": "sqlite"}


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
    created = await http.post("/api/v1/kbs", json={"kb_prefix": "harbour", "description": "harbour logs"})
    assert created.status_code == 201, created.text
    accepted = await http.post("/api/v1/kbs/harbour/documents", json={"documents": documents()})
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


async def assert_whole(http: httpx.AsyncClient, job_id: str, data_dir: Path) -> None:
    """The job is done with every document once, and the graph holds each whole."""
    record = await job(http, job_id)
    counts = record["counts"]
    assert (record["status"], record["processed"], counts["documents_failed"]) == ("done", DOCUMENTS, 0), record
    # A batch its worker indexed but could not record is indexed again: unchanged, never twice.
    assert counts["documents_added"] + counts["documents_unchanged"] == DOCUMENTS
    listed = (await http.get(f"/api/v1/jobs/{job_id}?documents=true&limit=1000")).json()["documents"]
    assert {d["status"] for d in listed} == {"done"}
    stored = (await http.get("/api/v1/kbs/harbour/documents")).json()["documents"]
    assert len(stored) == DOCUMENTS == len({d["doc_id"] for d in stored})
    assert {d["doc_id"] for d in stored} == {d["doc_id"] for d in listed}
    with sqlite3.connect(f"file:{data_dir / 'graph.db'}?mode=ro", uri=True) as graph:
        orphans = graph.execute(
            "SELECT count(*) FROM chunks AS c WHERE NOT EXISTS "
            "(SELECT 1 FROM documents AS d WHERE d.kb = c.kb AND d.doc_id = c.doc_id)"
        ).fetchone()[0]
        miscounted = graph.execute(
            "SELECT count(*) FROM documents AS d WHERE d.chunk_count != "
            "(SELECT count(*) FROM chunks AS c WHERE c.kb = d.kb AND c.doc_id = d.doc_id)"
        ).fetchone()[0]
        stray_mentions = graph.execute(
            "SELECT count(*) FROM entity_mentions AS m WHERE NOT EXISTS "
            "(SELECT 1 FROM chunks AS c WHERE c.kb = m.kb AND c.chunk_id = m.chunk_id)"
        ).fetchone()[0]
    assert (orphans, miscounted, stray_mentions) == (0, 0, 0)


def ingestion_workers() -> list[multiprocessing.Process]:
    return [child for child in multiprocessing.active_children() if child.name == "ingestion-worker"]


async def test_a_worker_killed_mid_job_is_replaced_and_the_job_finishes_whole(
    data_dir: Path, job_store: dict[str, str]
) -> None:
    settings = make_settings(data_dir, **JOB_SETTINGS, **job_store)
    with live_server(settings) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            job_id = await start_job(http)
            await until(http, job_id, mid_job, within_s=90)
            [worker] = ingestion_workers()
            os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]  # a started process has a pid

            await until(http, job_id, over, within_s=180)
            replaced = [child.pid for child in ingestion_workers()]
            assert replaced and worker.pid not in replaced
            await assert_whole(http, job_id, data_dir)


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


async def test_the_serving_process_killed_mid_job_resumes_it_after_a_restart(
    data_dir: Path, tmp_path: Path, job_store: dict[str, str]
) -> None:
    env = {
        "DATA_DIR": str(data_dir),
        "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY),
        "AUTH_MODE": "none",
        "GRAPH_STORE": "embedded",
        "EXTRACTOR": "offline",
        **JOB_SETTINGS,
        **job_store,
    }
    with ServeProcess(env, tmp_path) as first:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
            job_id = await start_job(http)
            await until(http, job_id, mid_job, within_s=90)
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
            await assert_whole(http, job_id, data_dir)
