"""The OpenAI-compatible facade over real HTTP, with the official `openai` SDK as the client: models, completions
streaming and not, conversation continuity from the request's messages, citations as annotations, errors in
OpenAI's shape. The server runs the real stack with the orchard sample KB and the scripted model server."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from backend.domain.tokens import estimate_tokens
from tests.e2e.conftest import orchard_titles, stored_when
from tests.support.live_server import LiveServer, live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM

FOUNDED = "When was Wrenfield Orchard founded, and by whom?"
REPORTED = {"prompt_tokens": 321, "completion_tokens": 6, "total_tokens": 327}  # what the scripted model reports
USAGE_ON: Any = {"include_usage": True}
WHO_RUNS = "Who runs it today?"


def annotations_of(container: Any) -> list[dict[str, Any]]:
    """Annotations as plain dicts, from a typed message or from a chunk delta (where they are an extra field)."""
    raw = container.annotations if hasattr(container, "annotations") else None
    if raw is None:
        raw = (container.model_extra or {}).get("annotations")
    assert raw is not None, "no annotations"
    return [a if isinstance(a, dict) else a.model_dump() for a in raw]


# -- models -----------------------------------------------------------------------------------------


async def test_models_are_auto_general_and_one_per_kb_and_agent(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    models = [model async for model in sdk.models.list()]
    agents = (await http.get("/api/v1/kbs")).json()["agent_types"]
    assert [m.id for m in models] == ["auto", "general", *(f"orchard/{agent}" for agent in sorted(agents))]
    assert "orchard/hybrid_agent" in {m.id for m in models}
    assert all(m.object == "model" and m.owned_by == "graphrag" and isinstance(m.created, int) for m in models)
    one = await sdk.models.retrieve("orchard/hybrid_agent")
    assert one.id == "orchard/hybrid_agent"
    with pytest.raises(openai.NotFoundError) as raised:
        await sdk.models.retrieve("orchard/no_such_agent")
    assert raised.value.code == "model_not_found"


# -- completions ------------------------------------------------------------------------------------


async def test_a_completion_returns_the_answer_with_citations_as_url_annotations(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    tokens = ["Wrenfield", " was", " founded", " in", " 1921", " [1]."]
    scripted_llm.script(Reply(tokens=tokens, usage=REPORTED))
    raw = await sdk.chat.completions.with_raw_response.create(
        model="orchard/naive_rag_agent",
        messages=[{"role": "user", "content": FOUNDED}],
        temperature=0.2,  # sampling options front ends send: accepted, not used
        max_tokens=300,
        top_p=0.9,
        presence_penalty=0.1,
    )
    completion = raw.parse()
    answer = "".join(tokens)
    assert completion.object == "chat.completion" and completion.model == "orchard/naive_rag_agent"
    assert completion.id == f"chatcmpl-{raw.headers['x-request-id']}"
    choice = completion.choices[0]
    assert (choice.message.role, choice.message.content, choice.finish_reason) == ("assistant", answer, "stop")
    assert completion.usage is not None
    assert completion.usage.model_dump(exclude_none=True) == REPORTED  # the figures the model reported

    annotations = annotations_of(choice.message)
    assert annotations and all(a["type"] == "url_citation" for a in annotations)
    sources = [a["url_citation"] for a in annotations]
    assert {c["title"] for c in sources} <= await orchard_titles(http)
    assert "History of Wrenfield Orchard" in {c["title"] for c in sources}
    # The answer cites one source: it comes first, the others follow as consulted, spanning nothing.
    assert [c["cited"] for c in sources] == [True] + [False] * (len(sources) - 1)
    assert all(c["start_index"] == c["end_index"] == len(answer) for c in sources[1:])
    first = sources[0]
    assert answer[first["start_index"] : first["end_index"]] == "[1]"
    assert first["snippet"] and first["doc_id"] and first["chunk_id"]
    # The url is the cited document in this API, and it resolves to that document.
    document = (await http.get(first["url"])).json()
    assert (document["doc_id"], document["title"]) == (first["doc_id"], first["title"])
    # The model saw the sources numbered as the annotations are.
    prompt = scripted_llm.requests[0]["messages"][-1]["content"]
    assert f"[1] {first['title']}" in prompt and prompt.endswith(f"Question: {FOUNDED}")

    messages = await stored_when(http, raw.headers["x-session-id"], 2)
    assert [(m["role"], m["content"], m["completed"]) for m in messages] == [
        ("user", FOUNDED, True),
        ("assistant", answer, True),
    ]
    assert [c["title"] for c in messages[1]["citations"]] == [first["title"]]
    assert [c["title"] for c in messages[1]["consulted"]] == [c["title"] for c in sources[1:]]


async def test_a_stream_sends_one_chunk_per_token_as_it_arrives_then_annotations_and_stop(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    tokens = ["Wrenfield", " was", " founded", " in", " 1921", " [1]."]
    scripted_llm.script(Reply(tokens=tokens, delay_s=0.15, usage=REPORTED))
    session = "s-" + uuid.uuid4().hex[:12]
    stream = await sdk.chat.completions.create(
        model="orchard/naive_rag_agent",
        messages=[{"role": "user", "content": FOUNDED}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Session-ID": session},
    )
    chunks, arrived = [], []
    async for chunk in stream:
        chunks.append(chunk)
        arrived.append(time.perf_counter())

    assert all(c.object == "chat.completion.chunk" and c.model == "orchard/naive_rag_agent" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    # include_usage: one more chunk, without choices, carries the usage; the others have none.
    *chunks, usage_chunk = chunks
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.model_dump(exclude_none=True) == REPORTED
    assert [c.usage for c in chunks] == [None] * len(chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [c for c in chunks if c.choices[0].delta.content]
    assert [c.choices[0].delta.content for c in content_chunks] == tokens  # one chunk per model delta, in order
    assert chunks[1:-1] == content_chunks
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop"
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)

    # Strict streaming: token k reached the client before the scripted model even wrote token k+1.
    sent = scripted_llm.token_sent_at[0]
    token_arrivals = [t for t, c in zip(arrived, chunks, strict=False) if c.choices[0].delta.content]
    for k in range(len(tokens) - 1):
        assert token_arrivals[k] < sent[k + 1], f"token {k} was held back until token {k + 1} was sent"

    annotations = annotations_of(last.delta)
    titles = [a["url_citation"]["title"] for a in annotations]
    assert "History of Wrenfield Orchard" in titles and set(titles) <= await orchard_titles(http)
    answer = "".join(tokens)
    assert answer[annotations[0]["url_citation"]["start_index"] : annotations[0]["url_citation"]["end_index"]] == "[1]"
    assert [a["url_citation"]["cited"] for a in annotations] == [True] + [False] * (len(annotations) - 1)

    messages = await stored_when(http, session, 2)
    assert [(m["role"], m["content"], m["completed"]) for m in messages] == [
        ("user", FOUNDED, True),
        ("assistant", answer, True),
    ]
    assert [c["title"] for c in messages[1]["citations"] + messages[1]["consulted"]] == titles


async def test_the_raw_stream_is_lf_framed_and_ends_with_done(
    http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Hi", " there"]))
    body = {"model": "general", "stream": True, "messages": [{"role": "user", "content": "hello!"}]}
    async with http.stream("POST", "/v1/chat/completions", json=body) as response:
        raw = b"".join([part async for part in response.aiter_raw()])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-session-id"].startswith("oai-")
    assert b"\r" not in raw and raw.startswith(b"data: {") and raw.endswith(b"data: [DONE]\n\n")
    frames = [frame for frame in raw.split(b"\n\n") if frame]
    assert all(frame.startswith(b"data: ") for frame in frames)
    assert len(frames) == 1 + 2 + 1 + 1  # role, two tokens, stop with annotations, [DONE]
    assert b'"annotations":[]' in frames[-2]  # general chat: no retrieval, no citations
    assert b'"usage"' not in raw  # not asked for (stream_options.include_usage)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_that_reports_no_usage_gets_the_estimate_of_what_it_was_sent_and_wrote(
    sdk: openai.AsyncOpenAI, scripted_llm: ScriptedLLM, stream: bool
) -> None:
    tokens = ["Agnes", " and", " Tobias", " Wren", " founded", " it", " in", " 1921", " [1]."]
    scripted_llm.script(Reply(tokens=tokens, usage={}))  # a usage chunk without counts
    ask = {"model": "orchard/naive_rag_agent", "messages": [{"role": "user", "content": FOUNDED}]}
    if stream:
        chunks = [c async for c in await sdk.chat.completions.create(**ask, stream=True, stream_options=USAGE_ON)]
        usage = chunks[-1].usage
    else:
        usage = (await sdk.chat.completions.create(**ask)).usage
    sent = scripted_llm.requests[0]["messages"]
    assert usage is not None
    assert usage.prompt_tokens == sum(estimate_tokens(message["content"]) for message in sent)
    assert usage.completion_tokens == estimate_tokens("".join(tokens)) > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens > estimate_tokens(FOUNDED) + 50  # the sources were counted with the question


async def test_continuity_comes_from_the_request_and_both_turns_share_one_session(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Ada", " Wren", " founded", " it."]), Reply(tokens=["Ruth", " Wren."]))
    model = "general"
    first = await sdk.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": FOUNDED}]
    )
    first_answer = first.parse().choices[0].message.content
    assert first_answer == "Ada Wren founded it."

    # The client shows (and sends back) its own version of the earlier answer; the model must get that one,
    # not the stored one. The system prompt is accepted and not passed on.
    edited = "Ada Wren founded it in 1921."
    conversation = [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": [{"type": "text", "text": FOUNDED}]},
        {"role": "assistant", "content": edited},
        {"role": "user", "content": WHO_RUNS},
    ]
    second = await sdk.chat.completions.with_raw_response.create(model=model, messages=conversation, stream=False)
    assert second.parse().choices[0].message.content == "Ruth Wren."

    received = scripted_llm.requests[1]["messages"]
    assert [(m["role"], m["content"]) for m in received[1:]] == [
        ("user", FOUNDED),
        ("assistant", edited),
        ("user", WHO_RUNS),
    ]
    assert received[0]["role"] == "system" and "pirate" not in received[0]["content"]
    assert len(scripted_llm.requests[0]["messages"]) == 2  # the first call had no history

    session = first.headers["x-session-id"]
    assert second.headers["x-session-id"] == session
    messages = await stored_when(http, session, 4)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", FOUNDED),
        ("assistant", "Ada Wren founded it."),
        ("user", WHO_RUNS),
        ("assistant", "Ruth Wren."),
    ]
    # Another opening message is another conversation.
    scripted_llm.script(Reply(tokens=["ok"]))
    other = await sdk.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": WHO_RUNS}]
    )
    assert other.headers["x-session-id"] != session


async def test_the_auto_model_lets_the_router_pick_the_kb(
    sdk: openai.AsyncOpenAI, scripted_llm: ScriptedLLM, server: LiveServer
) -> None:
    scripted_llm.script(Reply(tokens=["Several", " [1]."]))
    routed = await sdk.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "Which apple varieties grow at the orchard?"}]
    )
    urls = [a["url_citation"]["url"] for a in annotations_of(routed.choices[0].message)]
    assert urls and all(url.startswith(f"{server.base_url}/api/v1/kbs/orchard/documents") for url in urls)
    general = await sdk.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi!"}])
    assert general.choices[0].message.content == "Hello world!"  # the scripted server's default reply
    assert annotations_of(general.choices[0].message) == []
    # (The router may ask the model about "hi!" first; the last call is the answer's.)
    assert scripted_llm.requests[-1]["messages"][-1]["content"] == "hi!"  # general chat: no sources in the prompt


async def test_a_client_leaving_mid_stream_stops_the_model_and_keeps_the_partial_answer(
    http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=[f"t{i} " for i in range(40)], delay_s=0.05))
    session = "s-" + uuid.uuid4().hex[:12]
    body = {"model": "orchard/naive_rag_agent", "stream": True, "messages": [{"role": "user", "content": FOUNDED}]}
    tokens = 0
    async with http.stream("POST", "/v1/chat/completions", json=body, headers={"X-Session-ID": session}) as response:
        async for line in response.aiter_lines():
            tokens += '"delta":{"content":"t' in line
            if tokens == 3:
                break
    assert await scripted_llm.wait_outcome(0, within_s=5) == "disconnected"
    messages = await stored_when(http, session, 2)
    assert messages[1]["completed"] is False
    assert messages[1]["content"].startswith("t0 t1 t2 ") and len(messages[1]["content"].split()) < 40


async def test_metadata_names_the_session(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["fine"]))
    session = "s-" + uuid.uuid4().hex[:12]
    await sdk.chat.completions.create(
        model="general", messages=[{"role": "user", "content": "hello"}], metadata={"session_id": session}
    )
    assert [m["content"] for m in await stored_when(http, session, 2)] == ["hello", "fine"]


async def test_without_a_model_the_extractive_answer_counts_the_question_and_the_sources_it_read(
    data_dir: Path,
) -> None:
    ask = {"model": "orchard/naive_rag_agent", "messages": [{"role": "user", "content": FOUNDED}]}
    with live_server(make_settings(data_dir)) as running:
        async with openai.AsyncOpenAI(base_url=running.base_url + "/v1", api_key="k", max_retries=0) as offline:
            whole = await offline.chat.completions.create(**ask)
            stream = await offline.chat.completions.create(**ask, stream=True, stream_options=USAGE_ON)
            chunks = [chunk async for chunk in stream]
    answer = whole.choices[0].message.content or ""
    assert answer.startswith("Extractive answer") and annotations_of(whole.choices[0].message)
    usage = whole.usage
    assert usage is not None and usage.completion_tokens == estimate_tokens(answer)
    assert usage.prompt_tokens > estimate_tokens(FOUNDED)  # the question and the sources it quoted from
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == answer and chunks[-1].usage == usage  # the same turn, the same figures


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unknown_model_is_not_found_in_openai_error_shape(
    sdk: openai.AsyncOpenAI, scripted_llm: ScriptedLLM, stream: bool
) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        await sdk.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=stream)
    error = raised.value
    assert error.status_code == 404
    assert isinstance(error.body, dict) and set(error.body) == {"message", "type", "param", "code"}
    assert (error.type, error.code, error.param) == ("invalid_request_error", "model_not_found", "model")
    assert "gpt-4o" in error.message
    assert scripted_llm.requests == []


BAD_MESSAGES: list[tuple[list[dict[str, Any]], str | None]] = [
    ([], "messages"),
    ([{"role": "system", "content": "instructions only"}], "messages"),
    ([{"role": "user", "content": "   "}], "messages[0].content"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}], None),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "continue me"}], "messages[1]"),
    ([{"role": "robot", "content": "q"}], "messages[0].role"),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("messages", "param"), BAD_MESSAGES)
async def test_empty_or_unusable_messages_are_bad_requests_and_nothing_is_stored(
    sdk: openai.AsyncOpenAI,
    http: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    messages: list[dict[str, Any]],
    param: str | None,
    stream: bool,
) -> None:
    session = "s-" + uuid.uuid4().hex[:12]
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.chat.completions.create(
            model="auto",
            messages=messages,  # type: ignore[arg-type]
            stream=stream,
            extra_headers={"X-Session-ID": session},
        )
    error = raised.value
    assert error.status_code == 400 and error.type == "invalid_request_error" and error.message
    assert error.param == (param or "messages[0].content[0]")
    assert (await http.get(f"/api/v1/conversations/{session}/messages")).status_code == 404
    assert scripted_llm.requests == []


async def test_a_malformed_session_id_is_a_bad_request(sdk: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.chat.completions.create(
            model="general", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Session-ID": "bad id!"}
        )
    assert "session_id" in raised.value.message


async def test_a_model_failure_mid_stream_raises_in_the_sdk_and_keeps_the_partial_answer(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2))
    session = "s-" + uuid.uuid4().hex[:12]
    stream = await sdk.chat.completions.create(
        model="orchard/naive_rag_agent",
        messages=[{"role": "user", "content": FOUNDED}],
        stream=True,
        extra_headers={"X-Session-ID": session},
    )
    received: list[str] = []
    finishes: list[str | None] = []
    with pytest.raises(openai.APIError) as raised:
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
            finishes.append(chunk.choices[0].finish_reason)
    assert not isinstance(raised.value, openai.APIStatusError)  # an in-stream error, after a 200
    assert (raised.value.code, raised.value.type) == ("model_error", "server_error")
    assert "model" in raised.value.message
    assert "".join(received) == "Founded in" and "stop" not in finishes
    messages = await stored_when(http, session, 2)
    assert (messages[1]["role"], messages[1]["content"], messages[1]["completed"]) == ("assistant", "Founded in", False)


async def test_a_model_failure_without_streaming_is_a_server_error_and_is_recorded(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(status=500, error_message="upstream exploded"))
    session = "s-" + uuid.uuid4().hex[:12]
    with pytest.raises(openai.InternalServerError) as raised:
        await sdk.chat.completions.create(
            model="general", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Session-ID": session}
        )
    assert raised.value.status_code == 502
    assert (raised.value.type, raised.value.code) == ("server_error", "model_error")
    messages = await stored_when(http, session, 2)
    assert (messages[1]["role"], messages[1]["completed"]) == ("assistant", False)


async def test_only_v1_routes_speak_openai_errors(http: httpx.AsyncClient) -> None:
    unknown = await http.post("/v1/embeddings", json={"input": "x"})
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": {"message": "Not Found", "type": "invalid_request_error", "param": None, "code": "not_found"}
    }
    malformed = await http.post(
        "/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and malformed.json()["error"]["type"] == "invalid_request_error"
    rest = await http.post("/api/v1/chat", json={"message": "hi"})
    assert rest.status_code == 422 and set(rest.json()["error"]) == {"code", "message"}


async def test_credentials_decide_the_user_and_missing_ones_are_401(data_dir: Path, scripted_llm: ScriptedLLM) -> None:
    settings = make_settings(
        data_dir, AUTH_MODE="api_key", API_KEYS="alice-key=alice,bob-key=bob", **llm_settings(scripted_llm)
    )
    scripted_llm.script(Reply(tokens=["hello", " alice"]), Reply(tokens=["hello", " bob"]))
    with live_server(settings) as running:
        base = running.base_url + "/v1"
        async with (
            openai.AsyncOpenAI(base_url=base, api_key="alice-key", max_retries=0) as alice,
            openai.AsyncOpenAI(base_url=base, api_key="bob-key", max_retries=0) as bob,
            openai.AsyncOpenAI(base_url=base, api_key="wrong-key", max_retries=0) as stranger,
            httpx.AsyncClient(base_url=running.base_url, headers={"X-API-Key": "bob-key"}) as bob_http,
        ):
            with pytest.raises(openai.AuthenticationError) as raised:
                await stranger.models.list()
            assert (raised.value.status_code, raised.value.type) == (401, "authentication_error")
            assert raised.value.code == "unauthenticated"
            ask = [{"role": "user", "content": "hi"}]
            alice_call = await alice.chat.completions.with_raw_response.create(model="general", messages=ask)  # type: ignore[arg-type]
            bob_call = await bob.chat.completions.with_raw_response.create(model="general", messages=ask)  # type: ignore[arg-type]
            alice_session = alice_call.headers["x-session-id"]
            assert bob_call.headers["x-session-id"] != alice_session  # the same opening, another user
            # Alice's conversation is hers: Bob cannot read it under her session id.
            assert (await bob_http.get(f"/api/v1/conversations/{alice_session}/messages")).status_code == 404
            bobs = (await bob_http.get(f"/api/v1/conversations/{bob_call.headers['x-session-id']}/messages")).json()
            assert [m["content"] for m in bobs["messages"]] == ["hi", "hello bob"]


async def test_a_body_over_the_limit_is_413_in_openai_shape(data_dir: Path) -> None:
    with live_server(make_settings(data_dir, MAX_BODY_BYTES=2048)) as running:
        async with httpx.AsyncClient(base_url=running.base_url) as client:
            body = {"model": "auto", "messages": [{"role": "user", "content": "x" * 5000}]}
            response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 413
    assert response.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": None,
        "code": "payload_too_large",
    }
