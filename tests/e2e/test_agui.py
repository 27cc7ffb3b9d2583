"""POST /api/v1/agui over real HTTP: every frame validated with the ag_ui.core types, and the official
JavaScript client (@ag-ui/client HttpAgent, tests/js/agui_client.mjs) run against the live server."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import orjson
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from tests.e2e.test_chat_http import FOUNDED, wait_for_messages
from tests.support.js_clients import run_node
from tests.support.live_server import LiveServer
from tests.support.scripted_llm import Reply, ScriptedLLM

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)
TOKENS = ["Wrenfield", " was", " founded", " in", " 1921", " [1]."]


def run_input(thread_id: str, question: str, **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": "run-" + uuid.uuid4().hex[:12],
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": question}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    } | extra


async def agui_events(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[bytes, list[Any]]:
    """The raw body and every frame parsed into its ag_ui.core type (a frame that does not validate fails)."""
    async with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = b"".join([chunk async for chunk in response.aiter_bytes()])
    frames = [frame for frame in raw.split(b"\n\n") if frame.strip() and not frame.startswith(b":")]
    return raw, [EVENTS.validate_python(orjson.loads(frame.removeprefix(b"data: "))) for frame in frames]


def types(events: list[Any]) -> list[EventType]:
    return [event.type for event in events]


async def test_a_rag_run_streams_steps_tool_calls_citations_and_the_answer(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS))
    thread = "t-" + uuid.uuid4().hex[:12]
    body = run_input(thread, FOUNDED, forwardedProps={"kb": "orchard", "agent": "naive_rag_agent"})
    raw, events = await agui_events(client, "/api/v1/agui", body)

    assert b"\r" not in raw  # LF framing
    assert types(events)[0] is EventType.RUN_STARTED and types(events)[-1] is EventType.RUN_FINISHED
    started = events[0]
    assert (started.thread_id, started.run_id, started.protocol_version) == (thread, body["runId"], "1.0")
    steps = [(e.type, e.step_name) for e in events if e.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED)]
    assert steps == [
        (EventType.STEP_STARTED, "routing"),
        (EventType.STEP_FINISHED, "routing"),
        (EventType.STEP_STARTED, "retrieval:naive_rag_agent"),
        (EventType.STEP_FINISHED, "retrieval:naive_rag_agent"),
        (EventType.STEP_STARTED, "generation"),
        (EventType.STEP_FINISHED, "generation"),
    ]
    tool_events = [e for e in events if e.type.name.startswith("TOOL_CALL")]
    assert types(tool_events) == [
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
    ]
    assert len({e.tool_call_id for e in tool_events}) == 1
    assert orjson.loads(tool_events[1].delta) == {"query": FOUNDED, "kb": "orchard", "agent": "naive_rag_agent"}
    result = orjson.loads(tool_events[3].content)
    assert "History of Wrenfield Orchard" in {item["title"] for item in result["evidence"]}

    custom = {e.name: e.value for e in events if e.type is EventType.CUSTOM}
    assert custom["route"]["worker_name"] == "orchard:naive_rag_agent:retrieve_only"
    sources = custom["citations"] + custom["consulted"]
    assert any(c["title"] == "History of Wrenfield Orchard" and c["snippet"] for c in sources)
    assert len(custom["citations"]) == 1 and custom["consulted"]  # the answer cites [1] alone
    # The sources follow the answer's text: its markers tell which were cited.
    citations_at = [e.name for e in events if e.type is EventType.CUSTOM].index("citations")
    customs = [i for i, e in enumerate(events) if e.type is EventType.CUSTOM]
    assert customs[citations_at] > types(events).index(EventType.TEXT_MESSAGE_END)

    text = [e for e in events if e.type.name.startswith("TEXT_MESSAGE")]
    assert text[0].type is EventType.TEXT_MESSAGE_START and text[0].role == "assistant"
    assert [e.delta for e in text[1:-1]] == TOKENS  # one content event per model delta
    assert text[-1].type is EventType.TEXT_MESSAGE_END
    assert len({e.message_id for e in text}) == 1

    messages = await wait_for_messages(client, thread, 2)
    assert messages[1]["content"] == "".join(TOKENS)
    assert events[-1].result == {"message_id": messages[1]["id"]}


async def test_the_endpoint_path_binds_the_kb_and_agent(client: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " 1921."]))
    _, events = await agui_events(
        client, "/api/v1/agui/orchard/naive_rag_agent", run_input("t-" + uuid.uuid4().hex, FOUNDED)
    )
    args = next(e for e in events if e.type is EventType.TOOL_CALL_ARGS)
    assert orjson.loads(args.delta)["agent"] == "naive_rag_agent"
    assert types(events)[-1] is EventType.RUN_FINISHED


async def test_general_chat_has_no_retrieval(client: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["Hi", " there"]))
    body = run_input("t-" + uuid.uuid4().hex[:12], "hello!", forwardedProps={"kb": "general"})
    _, events = await agui_events(client, "/api/v1/agui", body)
    assert not [e for e in events if e.type.name.startswith("TOOL_CALL")]
    assert [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT] == ["Hi", " there"]
    assert types(events)[-1] is EventType.RUN_FINISHED


async def test_a_model_failure_ends_with_run_error_after_closing_the_message_and_steps(
    client: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2))
    thread = "t-" + uuid.uuid4().hex[:12]
    _, events = await agui_events(client, "/api/v1/agui/orchard", run_input(thread, FOUNDED))

    assert types(events)[-3:] == [EventType.TEXT_MESSAGE_END, EventType.STEP_FINISHED, EventType.RUN_ERROR]
    assert EventType.RUN_FINISHED not in types(events)
    assert "model" in events[-1].message
    assert [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT] == ["Founded", " in"]
    messages = await wait_for_messages(client, thread, 2)
    assert (messages[1]["content"], messages[1]["completed"]) == ("Founded in", False)


@pytest.mark.parametrize(
    ("path", "change", "code"),
    [
        ("/api/v1/agui", {"messages": [{"id": "a", "role": "assistant", "content": "hi"}]}, "invalid_request"),
        ("/api/v1/agui", {"forwardedProps": {"kb": "nope"}}, "unknown_kb"),
        ("/api/v1/agui/orchard", {"forwardedProps": {"kb": "other"}}, "invalid_request"),
        ("/api/v1/agui", {"forwardedProps": {"kb": "orchard", "agent": "chat_agent"}}, "unknown_agent_type"),
        ("/api/v1/agui", {"threadId": "bad id with spaces"}, "invalid_request"),
        (
            "/api/v1/agui",
            {
                "messages": [
                    {
                        "id": "u",
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}],
                    }
                ]
            },
            "invalid_request",
        ),
    ],
)
async def test_bad_input_is_a_4xx_before_the_stream_and_nothing_is_stored(
    client: httpx.AsyncClient, path: str, change: dict[str, Any], code: str
) -> None:
    thread = "t-" + uuid.uuid4().hex[:12]
    body = run_input(thread, FOUNDED) | change
    response = await client.post(path, json=body)
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert (await client.get(f"/api/v1/conversations/{thread}/messages")).status_code == 404  # nothing stored


async def test_the_official_js_client_accepts_the_stream_and_rebuilds_the_answer(
    server: LiveServer, scripted_llm: ScriptedLLM
) -> None:
    second = ["It", " grows", " apples."]
    failing = Reply(tokens=["Partial", " answer", " lost"], drop_after=2)
    # The follow-ups refer back ("it"): with a model, each is first rewritten to stand alone (one call each).
    rewrites = [Reply(tokens=[q], content=q) for q in ("What does Wrenfield grow?", "Who runs Wrenfield now?")]
    scripted_llm.script(Reply(tokens=TOKENS, delay_s=0.02), rewrites[0], Reply(tokens=second), rewrites[1], failing)
    thread = "t-" + uuid.uuid4().hex[:12]
    observed = run_node(
        "agui_client.mjs",
        {
            "url": f"{server.base_url}/api/v1/agui",
            "threadId": thread,
            "questions": [FOUNDED, "And what does it grow?", "And who runs it now?"],
            "forwardedProps": {"kb": "orchard", "agent": "naive_rag_agent"},
        },
    )
    first_run, second_run, failed_run = observed["runs"]
    assert "error" not in first_run, first_run.get("error")
    assert first_run["runError"] is None
    assert first_run["protocolVersion"] == "1.0"
    assert first_run["eventTypes"][0] == "RUN_STARTED" and first_run["eventTypes"][-1] == "RUN_FINISHED"
    assert first_run["contentDeltas"] == TOKENS
    assert {c["name"] for c in first_run["custom"]} == {"route", "citations", "consulted"}

    # What the client rebuilt: the retrieval as an assistant tool call with its tool result, then the answer.
    rebuilt = observed["messages"]
    tool_call_message = next(m for m in rebuilt if m["role"] == "assistant" and m.get("toolCalls"))
    call = tool_call_message["toolCalls"][0]
    assert call["function"]["name"] == "retrieve"
    assert orjson.loads(call["function"]["arguments"])["kb"] == "orchard"
    tool_result = next(m for m in rebuilt if m["role"] == "tool")
    assert tool_result["toolCallId"] == call["id"]
    answers = [m["content"] for m in rebuilt if m["role"] == "assistant" and m.get("content")]
    assert answers[:2] == ["".join(TOKENS), "".join(second)]

    # The second run continued the same thread: the rewrite and then the answer saw the first turn.
    assert "error" not in second_run, second_run.get("error")
    assert "".join(TOKENS) in scripted_llm.requests[1]["messages"][-1]["content"]
    history = [m["content"] for m in scripted_llm.requests[2]["messages"] if m["role"] in ("user", "assistant")]
    assert "".join(TOKENS) in history

    # A failed run reaches the client as the run's error (RUN_ERROR), not as a protocol violation.
    assert failed_run["eventTypes"][-1] == "RUN_ERROR"
    assert "error" not in failed_run, failed_run.get("error")
    assert "model" in failed_run["runError"]["message"]
    assert failed_run["contentDeltas"] == ["Partial", " answer"]
