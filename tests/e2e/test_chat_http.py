"""The whole chat path over real HTTP: uvicorn → FastAPI → router → pool → agent → executor → SSE,
with the real MiniLM embedder, the embedded knowledge store, SQLite or Postgres history and the
scripted OpenAI-compatible model server."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.domain.errors import BudgetExceeded, ModelError
from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import read_stream

FOUNDED = "When was Wrenfield Orchard founded, and by whom?"


def new_session() -> str:
    return "s-" + uuid.uuid4().hex[:12]


async def history(client: httpx.AsyncClient, session: str, **params: str) -> httpx.Response:
    return await client.get(f"/api/v1/conversations/{session}/messages", params=params)


async def wait_for_messages(client: httpx.AsyncClient, session: str, count: int) -> list[dict[str, Any]]:
    for _ in range(200):
        response = await history(client, session)
        if response.status_code == 200 and len(response.json()["messages"]) >= count:
            return list(response.json()["messages"])
        await asyncio.sleep(0.025)
    raise AssertionError(f"{session} never reached {count} messages")


async def test_streamed_answer_arrives_as_emitted_then_its_cited_and_consulted_sources(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    tokens = ["Wrenfield", " was", " founded", " in", " 1921", " [2]."]
    scripted_llm.script(Reply(tokens=tokens, delay_s=0.15))
    session = new_session()
    capture = await read_stream(client, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})

    assert capture.status_code == 200
    assert capture.statuses[0] == "start" and capture.statuses[-1] == "done"
    assert capture.statuses.count("start") == 1 and capture.statuses.count("done") == 1
    assert [event["seq"] for event in capture.events] == list(range(len(capture.events)))
    assert len({event["request_id"] for event in capture.events}) == 1
    last_token = len(capture.statuses) - 1 - capture.statuses[::-1].index("token")
    assert capture.statuses[last_token + 1 :] == ["progress", "citations", "done"]
    [cited] = capture.of("citations")
    citations, consulted = cited["content"], cited["consulted"]
    # The model cited its second source: the answer's only citation, so the client reads [1].
    assert [event["content"] for event in capture.of("token")] == [*tokens[:-1], " [1]."]
    assert len(citations) == 1 and consulted
    assert citations[0]["id"] not in {c["id"] for c in consulted}
    assert "History of Wrenfield Orchard" in {c["title"] for c in citations + consulted}

    # One model delta → one token event, sent at once: token k reached the client before the
    # scripted model even wrote token k+1 (same process, same clock).
    sent = scripted_llm.token_sent_at[0]
    token_arrivals = [t for t, e in zip(capture.received_at, capture.events, strict=True) if e["status"] == "token"]
    for k in range(len(tokens) - 1):
        assert token_arrivals[k] < sent[k + 1], f"token {k} was held back until token {k + 1} was sent"

    # The model saw the retrieved sources numbered in rank order: [2] was the cited one, [1] the first consulted.
    prompt = scripted_llm.requests[0]["messages"][-1]["content"]
    assert f"[2] {citations[0]['title']}" in prompt and f"[1] {consulted[0]['title']}" in prompt
    assert prompt.endswith(f"Question: {FOUNDED}")

    messages = await wait_for_messages(client, session, 2)
    assert [(m["role"], m["content"], m["completed"]) for m in messages] == [
        ("user", FOUNDED, True),
        ("assistant", capture.text, True),
    ]
    assert messages[1]["id"] == capture.events[-1]["message_id"]
    assert (messages[1]["citations"], messages[1]["consulted"]) == (citations, consulted)


async def test_sse_framing_headers_and_heartbeat(data_dir: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["slow", " answer"], delay_s=0.45))
    settings = make_settings(data_dir, SSE_HEARTBEAT_S=0.1, **llm_settings(scripted_llm))
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=20) as http:
            capture = await read_stream(
                http, "/api/v1/chat/stream", {"session_id": new_session(), "message": "hello!", "kb_prefix": "general"}
            )
    assert capture.headers["content-type"].startswith("text/event-stream")
    assert capture.headers["x-accel-buffering"] == "no"
    assert b"\r" not in capture.raw
    assert b"\n\n" in capture.raw and not capture.raw.startswith(b"\n")
    assert "ping" in capture.comments
    assert capture.text == "slow answer"
    assert "citations" not in capture.statuses  # general chat: empty plan, no retrieval


async def test_model_failure_mid_stream_sends_error_then_done_and_keeps_the_partial_answer(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2))
    session = new_session()
    capture = await read_stream(client, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})
    assert capture.statuses[-2:] == ["error", "done"]
    assert "model" in capture.of("error")[0]["message"]
    assert capture.text == "Founded in"
    messages = await wait_for_messages(client, session, 2)
    assert (messages[1]["content"], messages[1]["completed"]) == ("Founded in", False)


async def test_client_disconnect_stores_the_partial_answer_exactly_once(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=[f"t{i} " for i in range(40)], delay_s=0.05))
    session = new_session()
    capture = await read_stream(
        client, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED}, stop_after_tokens=3
    )
    assert len(capture.of("token")) == 3
    assert await scripted_llm.wait_outcome(0, within_s=5) == "disconnected"  # the model call was stopped too
    messages = await wait_for_messages(client, session, 2)
    await asyncio.sleep(0.3)  # a duplicate save, if any, would land now
    messages = (await history(client, session)).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["completed"] is False
    assert messages[1]["content"].startswith("t0 t1 t2 ")
    assert len(messages[1]["content"].split()) < 40


async def test_extractive_answer_without_a_model(data_dir: Path) -> None:
    with live_server(make_settings(data_dir)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=20) as http:
            response = await http.post(
                "/api/v1/chat",
                json={
                    "session_id": new_session(),
                    "message": "How much does the mill tour cost for an adult?",
                    "kb_prefix": "orchard",
                },
            )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["generation_mode"] == "extractive"
    assert body["answer"].startswith("Extractive answer")
    assert "£12 per adult" in body["answer"]
    assert body["citations"][0]["title"] == "Visiting Wrenfield"
    assert all(f"[{n}]" in body["answer"] for n in range(1, len(body["citations"]) + 1))
    assert body["route"]["worker_name"] == "orchard:naive_rag_agent:retrieve_only"


async def test_router_picks_the_kb_by_itself_and_general_chat_skips_retrieval(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["a"]), Reply(tokens=["b"]))
    routed = (
        await client.post(
            "/api/v1/chat", json={"session_id": new_session(), "message": "Which apple varieties grow at the orchard?"}
        )
    ).json()
    assert (routed["route"]["kb_prefix"], routed["route"]["method"]) == ("orchard", "heuristic")
    assert routed["citations"] == [] and routed["consulted"]  # an answer without markers cites nothing
    general = (await client.post("/api/v1/chat", json={"session_id": new_session(), "message": "hi!"})).json()
    assert (general["route"]["kb_prefix"], general["route"]["worker_name"]) == ("general", "")
    assert general["citations"] == general["consulted"] == []


async def test_history_listing_paging_and_clear(client: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    session = new_session()
    for number in range(3):
        scripted_llm.script(Reply(tokens=[f"answer {number}"]))
        response = await client.post(
            "/api/v1/chat", json={"session_id": session, "message": f"question {number}", "kb_prefix": "general"}
        )
        assert response.status_code == 200
    messages = (await history(client, session)).json()["messages"]
    assert [m["content"] for m in messages] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
        "answer 2",
    ]
    page = (await history(client, session, limit="2", before=messages[4]["id"])).json()["messages"]
    assert [m["content"] for m in page] == ["question 1", "answer 1"]
    # History reaches the model: the third call carried the earlier turns.
    assert [m["content"] for m in scripted_llm.requests[2]["messages"][1:5]] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
    ]

    cleared = await client.post("/api/v1/clear", json={"session_id": session})
    assert cleared.json() == {"status": "ok", "remaining_messages": "0", "cleared_messages": 6}
    assert (await history(client, session)).json()["messages"] == []
    again = await client.post("/api/v1/clear", json={"session_id": session})
    assert again.json()["cleared_messages"] == 0


async def test_feedback_on_an_answer(client: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    session = new_session()
    answer = (await client.post("/api/v1/chat", json={"session_id": session, "message": FOUNDED})).json()
    ok = await client.post(
        "/api/v1/feedback",
        json={"message_id": answer["message_id"], "is_positive": True, "session_id": session, "query": FOUNDED},
    )
    assert ok.status_code == 200 and ok.json()["feedback_id"]
    unknown = await client.post("/api/v1/feedback", json={"message_id": str(uuid.uuid4()), "is_positive": False})
    assert unknown.status_code == 404


BAD_INPUTS = [
    ({"message": "hi", "kb_prefix": "nope"}, 404, "unknown_kb"),
    ({"message": "hi", "kb_prefix": "orchard", "agent_type": "chat_agent"}, 400, "unknown_agent_type"),
    ({"message": "hi", "worker_name": "orchard:naive_rag_agent:chat"}, 400, "invalid_worker_name"),
    ({"message": "hi", "worker_name": "a:b:c:d"}, 400, "invalid_worker_name"),
    ({"message": ""}, 422, "validation_error"),
    ({"message": "   \n "}, 400, "invalid_request"),
    ({"message": "x" * 8001}, 400, "invalid_request"),
    ({"message": "hi", "unexpected": 1}, 422, "validation_error"),
]


@pytest.mark.parametrize("endpoint", ["/api/v1/chat", "/api/v1/chat/stream"])
@pytest.mark.parametrize(("fields", "status", "code"), BAD_INPUTS)
async def test_bad_input_is_a_clear_4xx_and_nothing_is_stored(
    client: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    endpoint: str,
    fields: dict[str, Any],
    status: int,
    code: str,
) -> None:
    session = new_session()
    response = await client.post(endpoint, json={"session_id": session, **fields})
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert (await history(client, session)).status_code == 404
    assert scripted_llm.requests == []


@pytest.mark.parametrize("endpoint", ["/api/v1/chat", "/api/v1/chat/stream", "/api/v1/clear", "/api/v1/feedback"])
async def test_malformed_json_is_400(client: httpx.AsyncClient, endpoint: str) -> None:
    response = await client.post(
        endpoint, content=b'{"session_id": "s1", "message": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


async def test_a_body_over_the_limit_is_413(data_dir: Path) -> None:
    with live_server(make_settings(data_dir, MAX_BODY_BYTES=2048)) as running:
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            response = await http.post("/api/v1/chat", json={"session_id": "s1", "message": "x" * 5000})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


async def test_health_ready_and_kbs(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health")).json() == {"status": "ok"}
    ready = await client.get("/ready")
    assert ready.status_code == 200
    checks = {"conversation_store": "ok", "knowledge_store": "ok", "job_store": "ok"}
    assert ready.json() == {"ready": True, "checks": checks}
    kbs = (await client.get("/api/v1/kbs")).json()
    assert [kb["kb_prefix"] for kb in kbs["knowledge_bases"]] == ["orchard"]
    assert kbs["agent_types"] == sorted(
        ["naive_rag_agent", "graph_agent", "hybrid_agent", "deep_research_agent", "fusion_agent"]
    )
    assert kbs["generation_mode"] == "llm"


async def test_a_chunked_body_over_the_limit_is_413(data_dir: Path) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"session_id": "s1", "message": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'"}'

    with live_server(make_settings(data_dir, MAX_BODY_BYTES=2048)) as running:
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            response = await http.post("/api/v1/chat", content=chunks(), headers={"content-type": "application/json"})
            assert (await history(http, "s1")).status_code == 404
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


async def test_debug_requests_add_execution_logs_and_store_them(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["ok"]))
    session = new_session()
    body = {"session_id": session, "message": FOUNDED, "debug": True}
    capture = await read_stream(client, "/api/v1/chat/stream", body)
    logs = [event["content"] for event in capture.of("execution_log")]
    nodes = ["route", "retrieval:naive_rag_agent", "model_call", "timings"]  # DEBUG_LEVEL standard
    assert [log["node"] for log in logs] == nodes
    assert logs[0]["output"]["worker_name"] == "orchard:naive_rag_agent:retrieve_only"
    assert logs[1]["output"]["results"] and logs[1]["duration_ms"] > 0
    assert logs[2]["input"]["model"] and logs[2]["output"]["streamed"] is True  # the scripted model, over HTTP
    assert logs[3]["output"]["completed"] is True and logs[3]["output"]["model_calls"] == 1
    messages = await wait_for_messages(client, session, 2)
    stored_nodes = [entry["node"] for entry in messages[1]["debug"]["execution_log"]]
    assert stored_nodes == nodes and messages[1]["debug"]["debug_level"] == "standard"
    basic = await read_stream(
        client, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED, "debug": "basic"}
    )
    assert [event["content"]["node"] for event in basic.of("execution_log")] == ["timings"]
    plain = await read_stream(client, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})
    assert "execution_log" not in plain.statuses


async def test_plain_chat_honours_debug_and_returns_what_is_stored(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in 1921."]), Reply(tokens=["ok"]), Reply(tokens=["ok"]))
    session = new_session()
    answered = await client.post("/api/v1/chat", json={"session_id": session, "message": FOUNDED, "debug": True})
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["answer"] == "Founded in 1921."
    debug = body["debug"]
    logs = debug["execution_log"]
    assert [log["node"] for log in logs] == ["route", "retrieval:naive_rag_agent", "model_call", "timings"]
    assert logs[2]["output"]["streamed"] is True  # the turn's one pipeline: the answer was streamed and collected
    assert logs[3]["output"]["completed"] is True and logs[3]["output"]["model_calls"] == 1
    assert (debug["debug_level"], debug["generation_mode"], debug["route"]) == ("standard", "llm", body["route"])
    messages = (await history(client, session)).json()["messages"]
    assert messages[1]["id"] == body["message_id"] and messages[1]["debug"] == debug

    basic = await client.post("/api/v1/chat", json={"session_id": session, "message": FOUNDED, "debug": "basic"})
    assert [log["node"] for log in basic.json()["debug"]["execution_log"]] == ["timings"]
    plain = await client.post("/api/v1/chat", json={"session_id": session, "message": FOUNDED})
    assert plain.json()["debug"] is None


async def test_a_plain_chat_that_fails_answers_with_the_status_and_body_of_its_error(
    data_dir: Path, scripted_llm: ScriptedLLM
) -> None:
    """`/api/v1/chat` collects the turn's stream; a failure the stream reports as an `error` event is answered
    with the status and body the non-streamed path answered when it raised the error itself."""
    scripted_llm.script(
        Reply(tokens=["warm"]),
        Reply(status=500, error_message="upstream exploded"),  # not retried (llm_settings)
        Reply(tokens=[f"w{i} " for i in range(20)], delay_s=0.15),  # longer than REQUEST_TIMEOUT_S
        Reply(status=500, error_message="upstream exploded"),
    )
    session = new_session()
    settings = make_settings(data_dir, **llm_settings(scripted_llm), REQUEST_TIMEOUT_S=1.5)
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=20) as http:
            warm = await http.post("/api/v1/chat", json={"session_id": new_session(), "message": FOUNDED})
            assert warm.status_code == 200, warm.text  # the first retrieval loads the embedder: not on the clock
            body = {"session_id": session, "message": FOUNDED}
            model_down = await http.post("/api/v1/chat", json=body, headers={"X-Request-ID": "plain-chat-0001"})
            too_long = await http.post("/api/v1/chat", json=body, headers={"X-Request-ID": "plain-chat-0002"})
            completion = {"model": "orchard/naive_rag_agent", "messages": [{"role": "user", "content": FOUNDED}]}
            facade = await http.post(
                "/v1/chat/completions", json=completion, headers={"X-Request-ID": "plain-chat-0003"}
            )
            messages = (await history(http, session)).json()["messages"]

    assert model_down.status_code == 502
    assert model_down.json() == {
        "error": {"code": "model_error", "message": ModelError.public_text, "request_id": "plain-chat-0001"}
    }
    assert too_long.status_code == 504
    assert too_long.json() == {
        "error": {"code": "budget_exceeded", "message": BudgetExceeded.public_text, "request_id": "plain-chat-0002"}
    }
    assert facade.status_code == 502
    assert facade.json() == {
        "error": {
            "message": ModelError.public_text,
            "type": "server_error",
            "param": None,
            "code": "model_error",
            "request_id": "plain-chat-0003",
        }
    }
    # Each failed turn is stored once, its answer marked not completed, the error's text with it.
    assert [(m["role"], m["completed"]) for m in messages] == [("user", True), ("assistant", False)] * 2
    assert messages[1]["content"] == "" and messages[1]["debug"]["error"] == ModelError.public_text
    assert messages[3]["content"].startswith("w0 ") and messages[3]["debug"]["error"] == BudgetExceeded.public_text
