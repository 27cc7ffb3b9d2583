"""The injection corpus (tests/security/hostile.py) through every string field of the API, on the embedded stores
(SQLite history, SQLite graph) and on the servers (Postgres history, Neo4j graph).

For every value and field: never a 5xx; a 4xx is a clear JSON error; names that cannot exist (KBs, agent types,
session ids, user ids) are refused; text that is legitimately free (a message, a title) is stored verbatim and
reads back the same. After each test the sample KB's part of the graph is exactly as before, another user's
conversation is intact, and the sample KB still answers.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import AsyncGraphDatabase

from backend.bootstrap import GRAPH_DB, open_knowledge_service
from tests.e2e.conftest import SAMPLE_DOCUMENTS
from tests.e2e.test_agui import run_input
from tests.security.hostile import (
    HARMLESS,
    HOSTILE,
    HOSTILE_UPLOADS,
    in_path,
    nested,
    post_json,
    problems_with,
    query,
    raw_multipart,
    unreadable_encodings,
)
from tests.support.live_server import LiveServer, live_server, make_settings
from tests.support.neo4j import Neo4jServer

Census = Callable[[], Awaitable[dict[str, int]]]
SAMPLE_KB = "orchard"
FOUNDED = "When was Wrenfield Orchard founded, and by whom?"
EMBEDDED_TABLES = (
    "documents",
    "chunks",
    "entities",
    "entity_mentions",
    "relations",
    "relation_mentions",
    "communities",
    "community_members",
)


@dataclass
class Target:
    server: LiveServer
    census: Census  # the sample KB's rows or nodes, read from the store itself


def embedded_census(graph_db: Path) -> Census:
    async def census() -> dict[str, int]:
        with sqlite3.connect(f"file:{graph_db}?mode=ro", uri=True) as db:
            # Table names are this file's constants; the KB is a parameter.
            return {
                table: int(db.execute(f"SELECT count(*) FROM {table} WHERE kb = ?", (SAMPLE_KB,)).fetchone()[0])
                for table in EMBEDDED_TABLES
            }

    return census


def neo4j_census(server: Neo4jServer) -> Census:
    async def census() -> dict[str, int]:
        auth = (server.user, server.password) if server.password else None
        async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
            nodes, _, _ = await driver.execute_query(
                "MATCH (n {kb: $kb}) RETURN labels(n)[0] AS kind, count(*) AS count", {"kb": SAMPLE_KB}
            )
            edges, _, _ = await driver.execute_query(
                "MATCH (n {kb: $kb})-[r]->() RETURN type(r) AS kind, count(*) AS count", {"kb": SAMPLE_KB}
            )
            everything, _, _ = await driver.execute_query("MATCH (n) RETURN count(n) AS count")
        counts = {record["kind"]: record["count"] for record in [*nodes, *edges]}
        assert everything[0]["count"] >= sum(record["count"] for record in nodes)
        return counts

    return census


async def _wipe_and_ingest_sample(server: Neo4jServer, settings: Any) -> None:
    auth = (server.user, server.password) if server.password else None
    async with AsyncGraphDatabase.driver(server.uri, auth=auth) as driver:
        await driver.execute_query("MATCH (n) DETACH DELETE n")  # the tests own this database
    async with open_knowledge_service(settings) as knowledge:
        report = await knowledge.ingest(SAMPLE_KB, knowledge.load_files([SAMPLE_DOCUMENTS]))
        assert report.documents_added == 6


@pytest.fixture(scope="module", params=["embedded", pytest.param("servers", marks=pytest.mark.postgres)])
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, orchard_knowledge: Path
) -> Iterator[Target]:
    data_dir = tmp_path_factory.mktemp("hostile")
    if request.param == "embedded":
        shutil.copy(orchard_knowledge, data_dir / GRAPH_DB)
        settings = make_settings(data_dir)
        census = embedded_census(data_dir / GRAPH_DB)
    else:
        neo4j: Neo4jServer = request.getfixturevalue("neo4j_server")
        postgres_dsn: str = request.getfixturevalue("postgres_dsn")
        settings = make_settings(
            data_dir,
            GRAPH_STORE="neo4j",
            NEO4J_URI=neo4j.uri,
            NEO4J_USER=neo4j.user,
            NEO4J_PASSWORD=neo4j.password,
            CONVERSATION_STORE="postgres",
            POSTGRES_DSN=postgres_dsn,
        )
        asyncio.run(_wipe_and_ingest_sample(neo4j, settings))
        census = neo4j_census(neo4j)
    with live_server(settings) as running:
        yield Target(running, census)


@pytest.fixture
async def http(target: Target) -> Any:
    async with httpx.AsyncClient(base_url=target.server.base_url, timeout=60) as client:
        yield client


async def history(http: httpx.AsyncClient, session: str, user: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v1/conversations/{session}/messages", params={"user_id": user})
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def sample_kb_answers(http: httpx.AsyncClient) -> None:
    body = {"session_id": "check-" + uuid.uuid4().hex[:8], "message": FOUNDED, "kb_prefix": SAMPLE_KB}
    response = await post_json(http, "/api/v1/chat", body)
    assert response.status_code == 200, response.text
    assert "History of Wrenfield Orchard" in [c["title"] for c in response.json()["citations"]]


@pytest.fixture(autouse=True)
async def stores_unaffected(target: Target, http: httpx.AsyncClient) -> Any:
    """Around each test: the sample KB's graph, another user's conversation, and answers, exactly as before."""
    victim_session = "victim-" + uuid.uuid4().hex[:8]
    opened = await post_json(
        http, "/api/v1/chat", {"session_id": victim_session, "message": "What apples grow?", "user_id": "victim"}
    )
    assert opened.status_code == 200, opened.text
    graph_before = await target.census()
    victims_before = await history(http, victim_session, "victim")
    assert graph_before.get("documents", graph_before.get("Document")) == 6
    yield
    assert await target.census() == graph_before
    assert await history(http, victim_session, "victim") == victims_before
    await sample_kb_answers(http)


def succeeded(response: httpx.Response) -> bool:
    """2xx. (A path that a hostile value ended with "/" may get Starlette's redirect to the path without it.)"""
    return response.is_success


def report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(problems)


# --- chat: names must be refused, the message is free text stored verbatim


@pytest.mark.parametrize("field", ["kb_prefix", "agent_type", "worker_name", "session_id", "user_id"])
@pytest.mark.parametrize("endpoint", ["/api/v1/chat", "/api/v1/chat/stream"])
async def test_hostile_names_in_a_chat_request_are_refused(http: httpx.AsyncClient, endpoint: str, field: str) -> None:
    problems: list[str] = []
    for name, value in HOSTILE.items():
        session = "s-" + uuid.uuid4().hex[:10]
        body = {"session_id": session, "message": "hello there", "user_id": "mallory", field: value}
        response = await post_json(http, endpoint, body)
        problems += problems_with(response, f"{field}={name}")
        if name not in HARMLESS and succeeded(response):
            problems.append(f"{field}={name}: accepted with {response.status_code}")
        if response.status_code >= 400:
            stored = await http.get(f"/api/v1/conversations/{session}/messages", params={"user_id": "mallory"})
            if stored.status_code != 404:
                problems.append(f"{field}={name}: refused, yet {stored.status_code} {stored.text[:100]}")
    assert not problems, report(problems)


@pytest.mark.parametrize("endpoint", ["/api/v1/chat", "/api/v1/chat/stream"])
async def test_hostile_messages_are_stored_verbatim_or_refused_whole(http: httpx.AsyncClient, endpoint: str) -> None:
    problems: list[str] = []
    accepted: set[str] = set()
    for name, value in HOSTILE.items():
        session = "s-" + uuid.uuid4().hex[:10]
        response = await post_json(
            http, endpoint, {"session_id": session, "message": value, "user_id": "mallory", "kb_prefix": SAMPLE_KB}
        )
        problems += problems_with(response, f"message={name}")
        stored = await http.get(f"/api/v1/conversations/{session}/messages", params={"user_id": "mallory"})
        if response.status_code >= 400:
            if stored.status_code != 404:
                problems.append(f"message={name}: refused, yet its conversation exists")
            continue
        accepted.add(name)
        messages = stored.json()["messages"]
        if not messages or messages[0]["content"] != value.strip():
            problems.append(f"message={name}: stored as {messages[0]['content'][:60]!r}" if messages else name)
        if [m["role"] for m in messages] != ["user", "assistant"] or not messages[1]["completed"]:
            problems.append(f"message={name}: the turn did not complete: {[m['role'] for m in messages]}")
    assert not problems, report(problems)
    # Code in a message is only text: it gets through; nothing, blanks and oversized text do not.
    assert {name for name in HOSTILE if name.startswith(("cypher_", "sql_", "path_"))} <= accepted
    assert not {"empty", "whitespace", "huge"} & accepted


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/chat", b'{"session_id": "s-deep", "message": "hi", "user_id": "mallory", "kb_prefix": %s}'),
        ("/api/v1/feedback", b'{"message_id": "m1", "is_positive": true, "metadata": {"deep": %s}}'),
        ("/api/v1/kbs/orchard/documents", b'{"documents": [{"title": "t", "text": "x", "metadata": {"d": %s}}]}'),
        ("/v1/chat/completions", b'{"model": "general", "messages": %s}'),
    ],
)
async def test_deeply_nested_bodies_are_a_4xx(http: httpx.AsyncClient, path: str, body: bytes) -> None:
    for depth in (5_000, 200_000):  # past any parser's recursion limit; 100 deep is fine JSON
        response = await http.post(path, content=body % nested(depth), headers={"content-type": "application/json"})
        assert not problems_with(response, f"depth {depth}"), response.text
        assert 400 <= response.status_code < 500, (depth, response.text)
    assert (await http.get("/api/v1/conversations/s-deep/messages?user_id=mallory")).status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/api/v1/chat", {"session_id": "s-bytes", "message": "bad \ud800", "user_id": "mallory"}, {}),
        ("/api/v1/chat/stream", {"session_id": "s-bytes", "message": "bad \ud800", "user_id": "mallory"}, {}),
        ("/api/v1/clear", {"session_id": "s-bytes", "user_id": "mallory\ud800"}, {}),
        ("/api/v1/feedback", {"message_id": "m1", "is_positive": True, "query": "\ud800", "user_id": "mallory"}, {}),
        ("/api/v1/kbs/orchard/documents", {"documents": [{"title": "t", "text": "bad \ud800"}]}, {}),
        ("/api/v1/kbs/orchard/retrieve", {"query": "apples \ud800"}, {}),
        ("/api/v1/agui", run_input("s-bytes", "bad \ud800", forwardedProps={"user_id": "mallory"}), {}),
        ("/v1/chat/completions", {"model": "general", "messages": [{"role": "user", "content": "bad \ud800"}]}, {}),
        (
            "/v1/chat/completions",
            {"model": "general", "messages": [{"role": "user", "content": "bad \ud800"}]},
            {"X-Session-ID": "s-bytes"},
        ),
    ],
)
async def test_bodies_that_are_not_utf8_json_text_are_refused_whole(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """Raw surrogate bytes and other Unicode encodings: each a 400 naming the body, nothing stored."""
    problems: list[str] = []
    for encoding, content in unreadable_encodings(body).items():
        response = await http.post(path, content=content, headers={"content-type": "application/json", **headers})
        problems += problems_with(response, f"{path} {encoding}")
        if response.status_code != 400 or response.json()["error"]["code"] != "unstorable_text":
            problems.append(f"{path} {encoding}: {response.status_code} {response.text[:120]}")
    assert not problems, report(problems)
    assert (await http.get("/api/v1/conversations/s-bytes/messages?user_id=mallory")).status_code == 404


# --- history, clear and feedback


async def test_hostile_history_paths_and_queries(http: httpx.AsyncClient) -> None:
    session = "s-" + uuid.uuid4().hex[:10]
    await post_json(http, "/api/v1/chat", {"session_id": session, "message": "hello", "user_id": "mallory"})
    problems: list[str] = []
    for name, value in HOSTILE.items():
        listing = f"/api/v1/conversations/{session}/messages"
        for what, url in [
            ("session path", f"/api/v1/conversations/{in_path(value)}/messages?user_id=mallory"),
            ("limit", f"{listing}?{query(user_id='mallory', limit=value)}"),
            ("before", f"{listing}?{query(user_id='mallory', before=value)}"),
            ("user_id", f"{listing}?{query(user_id=value)}"),
        ]:
            response = await http.get(url)
            problems += problems_with(response, f"{what}={name}")
            if what in ("limit", "user_id") and name not in HARMLESS and succeeded(response):
                problems.append(f"{what}={name}: accepted")
    assert not problems, report(problems)
    assert len(await history(http, session, "mallory")) == 2


async def test_hostile_clear_requests_clear_nothing_else(http: httpx.AsyncClient) -> None:
    problems: list[str] = []
    for name, value in HOSTILE.items():
        for field in ("session_id", "kb_prefix", "user_id"):
            body = {"session_id": "s-unknown", "user_id": "mallory", field: value}
            response = await post_json(http, "/api/v1/clear", body)
            problems += problems_with(response, f"clear {field}={name}")
            if response.status_code == 200 and response.json()["cleared_messages"] != 0:
                problems.append(f"clear {field}={name}: cleared {response.json()['cleared_messages']}")
    assert not problems, report(problems)


async def test_hostile_feedback_is_refused_or_stored_on_the_callers_own_message(http: httpx.AsyncClient) -> None:
    session = "s-" + uuid.uuid4().hex[:10]
    answer = await post_json(http, "/api/v1/chat", {"session_id": session, "message": "hello", "user_id": "mallory"})
    message_id = answer.json()["message_id"]
    problems: list[str] = []
    for name, value in HOSTILE.items():
        bodies = {
            "message_id": {"message_id": value},
            "session_id": {"message_id": message_id, "session_id": value},
            "query": {"message_id": message_id, "query": value},
            "agent_type": {"message_id": message_id, "agent_type": value},
            "metadata value": {"message_id": message_id, "metadata": {"note": value, "nested": {"list": [value]}}},
            "metadata key": {"message_id": message_id, "metadata": {value: 1}},
            "user_id": {"message_id": message_id, "user_id": value},
        }
        for what, fields in bodies.items():
            response = await post_json(http, "/api/v1/feedback", {"is_positive": True, "user_id": "mallory"} | fields)
            problems += problems_with(response, f"feedback {what}={name}")
            if what in ("message_id", "user_id") and name not in HARMLESS and succeeded(response):
                problems.append(f"feedback {what}={name}: accepted")
    assert not problems, report(problems)


# --- knowledge bases: paths, retrieval, and documents with hostile content


async def test_hostile_knowledge_base_paths_and_retrieval(http: httpx.AsyncClient) -> None:
    problems: list[str] = []
    for name, value in HOSTILE.items():
        segment = in_path(value)
        requests = [
            ("GET", f"/api/v1/kbs/{segment}/documents", None),
            ("GET", f"/api/v1/kbs/{SAMPLE_KB}/documents/{segment}", None),
            ("DELETE", f"/api/v1/kbs/{SAMPLE_KB}/documents/{segment}", None),
            ("DELETE", f"/api/v1/kbs/{segment}/documents/{segment}", None),
            ("POST", f"/api/v1/kbs/{segment}/retrieve", {"query": "apples"}),
            ("POST", f"/api/v1/kbs/{SAMPLE_KB}/retrieve", {"query": value}),
            ("POST", f"/api/v1/kbs/{SAMPLE_KB}/retrieve", {"query": "apples", "agent_type": value}),
            ("POST", f"/api/v1/kbs/{segment}/documents", {"documents": [{"title": "t", "text": "x"}]}),
            ("POST", "/api/v1/kbs", {"kb_prefix": value}),
        ]
        for method, path, body in requests:
            if body is None:
                response = await http.request(method, path)
            else:
                response = await post_json(http, path, body)
            what = f"{method} {path[:60]} {str(body)[:40]}"
            problems += problems_with(response, f"{what} ({name})")
            if method == "DELETE" and succeeded(response):
                problems.append(f"{what} ({name}): deleted something")
    assert not problems, report(problems)


async def test_hostile_documents_are_stored_verbatim_and_found(http: httpx.AsyncClient) -> None:
    kb = "hostile_" + uuid.uuid4().hex[:6]
    created = await post_json(http, "/api/v1/kbs", {"kb_prefix": kb, "description": HOSTILE["cypher_detach"]})
    assert created.status_code == 201, created.text
    problems: list[str] = []
    ingested: dict[str, str] = {}
    for name, value in HOSTILE.items():
        document = {
            "title": value,
            "text": f"{value} Quince jelly is simmered at Hollowmere Farm in {name} season.",
            "metadata": {"note": value, "nested": {"list": [value, 1, None]}, value: "key"},
            "source": value,
        }
        response = await post_json(http, f"/api/v1/kbs/{kb}/documents?wait=true", {"documents": [document]})
        problems += problems_with(response, f"document={name}")
        if response.status_code == 201:
            [doc_id] = response.json()["doc_ids"]
            ingested[doc_id] = name
    assert not problems, report(problems)
    assert len(ingested) >= len(HOSTILE) - 6, f"too much refused: {set(HOSTILE) - set(ingested.values())}"

    listed = (await http.get(f"/api/v1/kbs/{kb}/documents")).json()["documents"]
    assert {document["doc_id"] for document in listed} == set(ingested)
    for document in listed:
        value = HOSTILE[ingested[document["doc_id"]]]
        one = (await http.get(f"/api/v1/kbs/{kb}/documents/{document['doc_id']}")).json()
        for stored in (document, one):
            # Titles are trimmed, a blank one is "untitled" (graph_indexer); the source is kept as sent.
            title = value.strip() or "untitled"
            assert (stored["title"], stored["source"]) == (title, value), ingested[document["doc_id"]]
            assert stored["metadata"] == {"note": value, "nested": {"list": [value, 1, None]}, value: "key"}

    found = await post_json(http, f"/api/v1/kbs/{kb}/retrieve", {"query": "quince jelly Hollowmere", "top_k": 5})
    assert found.status_code == 200, found.text
    assert found.json()["retrieval_results"]
    for doc_id in ingested:
        assert (await http.delete(f"/api/v1/kbs/{kb}/documents/{doc_id}")).status_code == 204
    assert (await http.get(f"/api/v1/kbs/{kb}/documents")).json()["documents"] == []


async def test_hostile_uploads_are_refused_naming_the_file_and_write_nothing(http: httpx.AsyncClient) -> None:
    kb = "uploads_" + uuid.uuid4().hex[:6]
    assert (await post_json(http, "/api/v1/kbs", {"kb_prefix": kb})).status_code == 201
    good = ("hide.txt", b"The kestrel hide at Hollowmere opens at dawn and closes at dusk.")
    assert (await http.post(f"/api/v1/kbs/{kb}/documents?wait=true", files=[("files", good)])).status_code == 201
    problems: list[str] = []
    for name, upload in HOSTILE_UPLOADS.items():
        # Alone, and after a good file in the same request: the whole request is refused either way.
        for files in ([upload], [("other.txt", b"Otters live by the mill race."), upload]):
            content, headers = raw_multipart(files)
            response = await http.post(f"/api/v1/kbs/{kb}/documents", content=content, headers=headers)
            problems += problems_with(response, f"upload {name}")
            if response.status_code != 400:
                problems.append(f"upload {name}: {response.status_code} {response.text[:120]}")
            elif "\x00" not in upload[0] and upload[0] not in response.json()["error"]["message"]:
                problems.append(f"upload {name}: the error does not name {upload[0]}: {response.text[:120]}")
    content, headers = raw_multipart([good], note="a\x00b")
    form = await http.post(f"/api/v1/kbs/{kb}/documents", content=content, headers=headers)
    problems += problems_with(form, "form field")
    if form.status_code != 400 or "note" not in form.json()["error"]["message"]:
        problems.append(f"form field with NUL: {form.status_code} {form.text[:120]}")
    assert not problems, report(problems)

    listed = (await http.get(f"/api/v1/kbs/{kb}/documents")).json()["documents"]
    assert [document["title"] for document in listed] == ["hide"]
    body = {"session_id": "s-" + uuid.uuid4().hex[:8], "message": "When does the kestrel hide open?", "kb_prefix": kb}
    answered = await post_json(http, "/api/v1/chat", body)
    assert answered.status_code == 200, answered.text
    assert [citation["title"] for citation in answered.json()["citations"]] == ["hide"]


# --- AG-UI and the OpenAI facade


def agui_input(thread_id: str, question: str, **extra: Any) -> dict[str, Any]:
    return run_input(thread_id, question, forwardedProps={"user_id": "mallory"}) | extra


async def test_hostile_agui_inputs(http: httpx.AsyncClient) -> None:
    problems: list[str] = []
    for name, value in HOSTILE.items():
        segment = in_path(value)
        session = "s-" + uuid.uuid4().hex[:10]
        cases = [
            ("threadId", "/api/v1/agui", agui_input(value, "hello"), True),
            ("runId", "/api/v1/agui", agui_input(session, "hello", runId=value), False),
            ("kb prop", "/api/v1/agui", agui_input(session, "hello", forwardedProps={"kb": value}), True),
            ("agent prop", "/api/v1/agui", agui_input(session, "hello", forwardedProps={"agent": value}), True),
            ("kb path", f"/api/v1/agui/{segment}", agui_input(session, "hello"), True),
            ("agent path", f"/api/v1/agui/{SAMPLE_KB}/{segment}", agui_input(session, "hello"), True),
            ("question", "/api/v1/agui", agui_input(session, value), False),
        ]
        for what, path, body, must_refuse in cases:
            response = await post_json(http, path, body)
            problems += problems_with(response, f"agui {what}={name}")
            if must_refuse and name not in HARMLESS and succeeded(response):
                problems.append(f"agui {what}={name}: accepted")
    assert not problems, report(problems)


async def test_hostile_openai_requests(http: httpx.AsyncClient) -> None:
    problems: list[str] = []
    for name, value in HOSTILE.items():
        ask = [{"role": "user", "content": "hello"}]
        cases = [
            ("model", {"model": value, "messages": ask}, {}, True),
            ("metadata.session_id", {"model": "general", "messages": ask, "metadata": {"session_id": value}}, {}, True),
            ("user", {"model": "general", "messages": ask, "user": value}, {}, False),
            ("content", {"model": "general", "messages": [{"role": "user", "content": value}]}, {}, False),
        ]
        if value.isascii() and value.isprintable() and value.strip() == value and value:
            cases.append(("X-Session-ID", {"model": "general", "messages": ask}, {"X-Session-ID": value}, True))
        for what, body, headers, must_refuse in cases:
            response = await post_json(http, "/v1/chat/completions", body, headers)
            problems += problems_with(response, f"openai {what}={name}")
            if must_refuse and name not in HARMLESS and succeeded(response):
                problems.append(f"openai {what}={name}: accepted")
    assert not problems, report(problems)
