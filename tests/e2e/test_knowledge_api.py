"""Knowledge bases over HTTP: create, ingest (JSON and files), list, retrieve, delete; admin only."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import LiveServer, live_server, make_settings

KEYS = {"admin": "key-admin-0123456789", "reader": "key-reader-0123456789"}
TWO_HOP = [
    {
        "title": "Lothair II",
        "text": "Lothair II (835 – 8 August 869) was king of Lotharingia. "
        "He was the second son of the emperor Lothair I and Ermengarde of Tours.",
        "source": "lothair",
    },
    {
        "title": "Ermengarde of Tours",
        "text": "Ermengarde of Tours (died 20 March 851) was a Frankish "
        "queen, the wife of the emperor Lothair I. She was the daughter of Hugh of Tours.",
        "source": "ermengarde",
    },
    {
        "title": "Hugh of Tours",
        "text": "Hugh of Tours was a count in Alsace and the father of Ermengarde.",
        "source": "hugh",
    },
    {"title": "Orchard apples", "text": "Kingston Black apples are pressed for cider in October.", "source": "apples"},
]


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['admin']}"}


def reader() -> dict[str, str]:
    return {"X-API-Key": KEYS["reader"]}


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {
        "AUTH_MODE": "api_key",
        "API_KEYS": f"{KEYS['admin']}=ada,{KEYS['reader']}=bob",
        "ADMIN_USERS": "ada",
    }


@pytest.fixture
def server(data_dir: Path, settings_overrides: dict[str, Any]):  # type: ignore[no-untyped-def]
    with live_server(make_settings(data_dir, **settings_overrides)) as running:
        yield running


@pytest.fixture
async def client(server: LiveServer):  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        yield http


async def create_history_kb(client: httpx.AsyncClient) -> None:
    body = {
        "kb_prefix": "history",
        "description": "Carolingian kings and queens",
        "keywords": ["lothair", "queen"],
        "default_agent": "graph_agent",
    }
    response = await client.post("/api/v1/kbs", json=body, headers=admin())
    assert response.status_code == 201, response.text


async def test_only_admins_create_kbs_ingest_or_delete(client: httpx.AsyncClient) -> None:
    body = {"kb_prefix": "history"}
    forbidden = await client.post("/api/v1/kbs", json=body, headers=reader())
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
    await create_history_kb(client)
    docs = {"documents": TWO_HOP[:1]}
    ingest = "/api/v1/kbs/history/documents?wait=true"
    assert (await client.post(ingest, json=docs, headers=reader())).status_code == 403
    assert (await client.post(ingest, json=docs, headers=admin())).status_code == 201
    listed = (await client.get("/api/v1/kbs/history/documents", headers=reader())).json()["documents"]
    assert (
        await client.delete(f"/api/v1/kbs/history/documents/{listed[0]['doc_id']}", headers=reader())
    ).status_code == 403
    assert (await client.post("/api/v1/kbs", json=body)).status_code == 401


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"kb_prefix": "orchard"}, 409, "conflict"),
        ({"kb_prefix": "Bad Name"}, 422, "validation_error"),
        ({"kb_prefix": "general"}, 400, "invalid_request"),
        ({"kb_prefix": "ok", "default_agent": "chat_agent"}, 400, "invalid_request"),
        ({"kb_prefix": "ok", "handler": "os:system"}, 422, "validation_error"),
    ],
)
async def test_bad_kb_definitions_are_refused(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, code: str
) -> None:
    response = await client.post("/api/v1/kbs", json=body, headers=admin())
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    prefixes = [kb["kb_prefix"] for kb in (await client.get("/api/v1/kbs", headers=admin())).json()["knowledge_bases"]]
    assert prefixes == ["orchard"]


async def test_ingest_list_retrieve_and_delete_documents(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    ingest = await client.post("/api/v1/kbs/history/documents?wait=true", json={"documents": TWO_HOP}, headers=admin())
    assert ingest.status_code == 201, ingest.text
    report = ingest.json()
    assert (report["documents_added"], report["documents_unchanged"]) == (4, 0)
    assert report["entity_mentions"] > 0 and len(report["doc_ids"]) == 4
    again = (
        await client.post("/api/v1/kbs/history/documents?wait=true", json={"documents": TWO_HOP}, headers=admin())
    ).json()
    assert (again["documents_added"], again["documents_unchanged"]) == (0, 4)

    documents = (await client.get("/api/v1/kbs/history/documents", headers=reader())).json()["documents"]
    assert sorted(d["title"] for d in documents) == sorted(d["title"] for d in TWO_HOP)
    hugh = next(d for d in documents if d["title"] == "Hugh of Tours")
    one = (await client.get(f"/api/v1/kbs/history/documents/{hugh['doc_id']}", headers=reader())).json()
    assert (one["title"], one["source"], one["chunk_count"]) == ("Hugh of Tours", "hugh", 1)
    assert (one["text"], one["chunks"]) == (TWO_HOP[2]["text"], None)

    body = {"query": "When did Lothair II's mother die?", "agent_type": "deep_research_agent", "top_k": 5}
    retrieved = (await client.post("/api/v1/kbs/history/retrieve", json=body, headers=reader())).json()
    titles = [r["source"]["title"] for r in retrieved["retrieval_results"]]
    assert "Ermengarde of Tours" in titles[:5] and "Lothair II" in titles[:5]
    assert len(retrieved["retrieval_results"]) <= 5
    assert retrieved["worker_name"] == "history:deep_research_agent:retrieve_only"
    assert {d["title"] for d in retrieved["reference"]["documents"]} >= {"Ermengarde of Tours"}

    deleted = await client.delete(f"/api/v1/kbs/history/documents/{hugh['doc_id']}", headers=admin())
    assert deleted.status_code == 204
    gone = await client.get(f"/api/v1/kbs/history/documents/{hugh['doc_id']}", headers=reader())
    assert gone.status_code == 404
    body = {"query": "Who was the count in Alsace?", "agent_type": "naive_rag_agent"}
    after = (await client.post("/api/v1/kbs/history/retrieve", json=body, headers=reader())).json()
    assert "Hugh of Tours" not in [r["source"]["title"] for r in after["retrieval_results"]]


async def test_a_document_reads_back_as_its_text_and_its_chunks(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    text = "\n\n".join(
        " ".join(f"In year {800 + 10 * p + n} the abbey of Prüm recorded harvest number {n}." for n in range(12))
        for p in range(6)
    )
    long = {"title": "Prüm annals", "text": text, "source": "annals/prum.md"}
    ingest = await client.post("/api/v1/kbs/history/documents?wait=true", json={"documents": [long]}, headers=admin())
    [doc_id] = ingest.json()["doc_ids"]
    url = f"/api/v1/kbs/history/documents/{doc_id}"

    read = (await client.get(url, params={"chunks": "true"}, headers=reader())).json()

    chunks = read["chunks"]
    assert len(chunks) == read["chunk_count"] > 2
    assert [c["ordinal"] for c in chunks] == list(range(len(chunks)))
    assert any(a["end"] > b["start"] for a, b in pairwise(chunks))  # the chunks overlap...
    assert read["text"].split() == text.split()  # ...and the text holds each overlap once
    assert all(read["text"][c["start"] : c["end"]] == c["text"] for c in chunks)
    assert set(chunks[0]) == {"chunk_id", "ordinal", "text", "start", "end"}
    assert (read["title"], read["source"]) == ("Prüm annals", "annals/prum.md")


@pytest.mark.parametrize(
    ("path", "headers", "status", "code"),
    [
        ("/api/v1/kbs/history/documents/no-such-document", reader(), 404, "not_found"),
        ("/api/v1/kbs/nope/documents/no-such-document", reader(), 404, "unknown_kb"),
        ("/api/v1/kbs/history/documents/no-such-document?chunks=maybe", reader(), 422, "validation_error"),
        ("/api/v1/kbs/history/documents/no-such-document", {}, 401, "unauthenticated"),
    ],
)
async def test_reading_a_missing_document_is_an_error_body(
    client: httpx.AsyncClient, path: str, headers: dict[str, str], status: int, code: str
) -> None:
    await create_history_kb(client)
    response = await client.get(path, headers=headers)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], bool(error["message"])) == (code, True)


async def test_a_changed_document_counts_once_as_replaced(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    await client.post("/api/v1/kbs/history/documents?wait=true", json={"documents": TWO_HOP}, headers=admin())
    edited = {**TWO_HOP[2], "text": "Hugh of Tours was a count in Alsace and Tours, and the father of Ermengarde."}
    response = await client.post(
        "/api/v1/kbs/history/documents?wait=true", json={"documents": [edited]}, headers=admin()
    )
    report = response.json()
    assert (report["documents_added"], report["documents_replaced"], report["documents_unchanged"]) == (0, 1, 0)
    documents = (await client.get("/api/v1/kbs/history/documents", headers=reader())).json()["documents"]
    assert [d["doc_id"] for d in documents if d["source"] == "hugh"] == report["doc_ids"]


async def test_files_are_uploaded_as_multipart(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    records = "\n".join(json.dumps({"title": d["title"], "text": d["text"]}) for d in TWO_HOP[:2])
    files = [
        ("files", ("notes.md", b"# Hugh of Tours\n\nHugh of Tours was a count in Alsace.", "text/markdown")),
        ("files", ("people.jsonl", records.encode(), "application/jsonl")),
    ]
    response = await client.post("/api/v1/kbs/history/documents?wait=true", files=files, headers=admin())
    assert response.status_code == 201, response.text
    assert response.json()["documents_added"] == 3
    titles = {
        d["title"] for d in (await client.get("/api/v1/kbs/history/documents", headers=admin())).json()["documents"]
    }
    assert titles == {"Hugh of Tours", "Lothair II", "Ermengarde of Tours"}


async def test_an_upload_of_too_many_records_is_refused_whole(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    records = "\n".join(json.dumps({"title": f"note {n}", "text": f"Note number {n}."}) for n in range(1001))
    files = [("files", ("many.jsonl", records.encode(), "application/jsonl"))]
    response = await client.post("/api/v1/kbs/history/documents?wait=true", files=files, headers=admin())
    assert response.status_code == 400, response.text
    assert "1000" in response.json()["error"]["message"]
    listed = (await client.get("/api/v1/kbs/history/documents", headers=admin())).json()["documents"]
    assert listed == []


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/api/v1/kbs/nope/documents", {"documents": TWO_HOP[:1]}, 404),
        ("/api/v1/kbs/orchard/documents", {"documents": []}, 422),
        ("/api/v1/kbs/orchard/documents", {"documents": [{"title": "x", "text": ""}]}, 422),
        ("/api/v1/kbs/orchard/retrieve", {"query": "apples", "agent_type": "chat_agent"}, 400),
        ("/api/v1/kbs/orchard/retrieve", {"query": "apples", "top_k": 0}, 422),
        ("/api/v1/kbs/nope/retrieve", {"query": "apples"}, 404),
    ],
)
async def test_bad_document_and_retrieval_requests_are_4xx(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], status: int
) -> None:
    before = (await client.get("/api/v1/kbs/orchard/documents", headers=admin())).json()["documents"]
    response = await client.post(path, json=body, headers=admin())
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]
    assert (await client.get("/api/v1/kbs/orchard/documents", headers=admin())).json()["documents"] == before


async def test_created_kbs_survive_a_restart_and_serve_chat(data_dir: Path, settings_overrides: dict[str, Any]) -> None:
    with live_server(make_settings(data_dir, **settings_overrides)) as first:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
            await create_history_kb(http)
            await http.post("/api/v1/kbs/history/documents?wait=true", json={"documents": TWO_HOP}, headers=admin())
    with live_server(make_settings(data_dir, **settings_overrides)) as second:
        async with httpx.AsyncClient(base_url=second.base_url, timeout=60) as http:
            listed = (await http.get("/api/v1/kbs", headers=reader())).json()["knowledge_bases"]
            assert [kb["kb_prefix"] for kb in listed] == ["orchard", "history"]
            chat = await http.post(
                "/api/v1/chat",
                headers=reader(),
                json={"session_id": "s1", "message": "Who was the mother of Lothair II?", "kb_prefix": "history"},
            )
    assert chat.status_code == 200, chat.text
    assert chat.json()["route"]["worker_name"] == "history:graph_agent:retrieve_only"
    assert any(c["title"] == "Lothair II" for c in chat.json()["citations"])


async def test_communities_follow_ingestion_in_the_background(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    await client.post("/api/v1/kbs/history/documents?wait=true", json={"documents": TWO_HOP}, headers=admin())
    body = {"query": "What are the main themes of this collection?", "agent_type": "graph_agent"}
    for _ in range(100):
        results = (await client.post("/api/v1/kbs/history/retrieve", json=body, headers=reader())).json()
        if any(r["granularity"] == "Community" for r in results["retrieval_results"]):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("no community summary appeared after ingestion")


async def follow(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    """The job's records as a reader sees them, polled until it is over."""
    seen = []
    for _ in range(200):
        response = await client.get(f"/api/v1/jobs/{job_id}", headers=reader())
        assert response.status_code == 200, response.text
        seen.append(response.json())
        if seen[-1]["status"] in ("done", "failed", "cancelled"):
            return seen
        await asyncio.sleep(0.6)  # under the rate limit
    raise AssertionError(f"job {job_id} never finished: {seen[-1]}")


async def test_an_ingestion_is_a_job_answered_at_once_and_followed_to_done(client: httpx.AsyncClient) -> None:
    await create_history_kb(client)
    accepted = await client.post("/api/v1/kbs/history/documents", json={"documents": TWO_HOP}, headers=admin())
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert (job["status"], job["total"], job["processed"], job["kb_prefix"]) == ("queued", 4, 0, "history")
    assert job["created_by"] == "ada"

    seen = await follow(client, job["job_id"])
    done = seen[-1]
    assert done["status"] == "done" and done["processed"] == 4 and done["error"] is None
    assert (done["counts"]["documents_added"], done["counts"]["documents_failed"]) == (4, 0)
    assert [record["processed"] for record in seen] == sorted(record["processed"] for record in seen)
    listed = (await client.get(f"/api/v1/jobs/{job['job_id']}?documents=true", headers=reader())).json()
    assert [(d["position"], d["title"], d["status"]) for d in listed["documents"]] == [
        (n, document["title"], "done") for n, document in enumerate(TWO_HOP)
    ]
    documents = (await client.get("/api/v1/kbs/history/documents", headers=reader())).json()["documents"]
    assert sorted(d["doc_id"] for d in documents) == sorted(d["doc_id"] for d in listed["documents"])
    jobs = (await client.get("/api/v1/kbs/history/jobs", headers=reader())).json()["jobs"]
    assert [j["job_id"] for j in jobs] == [job["job_id"]]

    # Cancelling is for admins; a finished job stays as it was.
    assert (await client.delete(f"/api/v1/jobs/{job['job_id']}", headers=reader())).status_code == 403
    kept = await client.delete(f"/api/v1/jobs/{job['job_id']}", headers=admin())
    assert (kept.status_code, kept.json()["status"]) == (200, "done")


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/v1/jobs/no-such-job"), ("DELETE", "/api/v1/jobs/no-such-job"), ("GET", "/api/v1/kbs/nope/jobs")],
)
async def test_an_unknown_job_or_kb_is_404(client: httpx.AsyncClient, method: str, path: str) -> None:
    response = await client.request(method, path, headers=admin())
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] in ("not_found", "unknown_kb")
