"""POST /v1/responses over real HTTP, with the clients that read citations from it: the `openai` SDK
(`client.responses.create`, whole and streamed) and langchain-openai's `ChatOpenAI(use_responses_api=True)`
(`.invoke` and `.stream`), whose chat completions parser drops annotations. The server runs the real stack with
the orchard sample KB and the scripted model server."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI

from backend.domain.tokens import estimate_tokens
from tests.e2e.conftest import orchard_titles, stored_when
from tests.support.live_server import LiveServer, live_server, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM

FOUNDED = "When was Wrenfield Orchard founded, and by whom?"
WHO_RUNS = "Who runs it today?"
TOKENS = ["Agnes", " and", " Tobias", " Wren", " founded", " it", " in", " 1921", " [1]."]
ANSWER = "".join(TOKENS)
REPORTED = {"prompt_tokens": 734, "completion_tokens": 9, "total_tokens": 743}  # what the scripted model reports
MODEL = "orchard/naive_rag_agent"
STREAM_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * len(TOKENS),
    "response.output_text.annotation.added",  # one per source: checked apart
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def session_id() -> str:
    return "s-" + uuid.uuid4().hex[:12]


def chat_openai(server: LiveServer, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL,
        base_url=server.base_url + "/v1",
        api_key="unused-in-dev-mode",  # type: ignore[arg-type]
        use_responses_api=True,
        max_retries=0,
        timeout=20,
        **options,
    )


async def assert_cites_history(http: httpx.AsyncClient, text: str, annotations: list[dict[str, Any]]) -> None:
    """The sources reached the client: the cited ones first, the n-th spanning the answer's first `[n]`, the first
    being the history at a url that serves it; then the consulted ones, spanning nothing at the end of the answer."""
    assert annotations and all(a["type"] == "url_citation" for a in annotations)
    cited = [a for a in annotations if a["cited"]]
    consulted = annotations[len(cited) :]
    assert cited and consulted and not any(a["cited"] for a in consulted)
    assert [text[a["start_index"] : a["end_index"]] for a in cited] == [f"[{n}]" for n in range(1, len(cited) + 1)]
    assert all(a["start_index"] == a["end_index"] == len(text) for a in consulted)
    first = cited[0]
    assert first["title"] == "History of Wrenfield Orchard"
    document = (await http.get(first["url"])).json()
    assert (document["doc_id"], document["title"]) == (first["doc_id"], first["title"])
    assert {a["title"] for a in annotations} <= await orchard_titles(http)


# -- the openai SDK ---------------------------------------------------------------------------------


async def test_a_response_is_one_message_with_its_sources_as_url_citations_and_the_reported_usage(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS, usage=REPORTED))
    raw = await sdk.responses.with_raw_response.create(
        model=MODEL, input=FOUNDED, instructions="Answer like a pirate.", temperature=0.2, store=True
    )
    response = raw.parse()
    assert (response.id, response.object, response.status) == (
        f"resp_{raw.headers['x-request-id']}",
        "response",
        "completed",
    )
    assert response.model == MODEL and response.output_text == ANSWER
    [message] = response.output
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    [part] = message.content
    assert part.type == "output_text"
    await assert_cites_history(http, part.text, [a.model_dump() for a in part.annotations])
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (734, 9, 743)
    # The instructions are accepted and not used, as system messages are on chat completions.
    assert "pirate" not in str(scripted_llm.requests[0]["messages"])
    messages = await stored_when(http, raw.headers["x-session-id"], 2)
    assert [(m["role"], m["content"], m["completed"]) for m in messages] == [
        ("user", FOUNDED, True),
        ("assistant", ANSWER, True),
    ]
    assert messages[1]["citations"][0]["title"] == part.annotations[0].title


async def test_a_streamed_response_sends_the_responses_events_in_order_as_the_model_writes(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS, delay_s=0.1, usage=REPORTED))
    session = session_id()
    stream = await sdk.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [{"type": "input_text", "text": FOUNDED}]}],
        stream=True,
        extra_headers={"X-Session-ID": session},
    )
    events, arrived = [], []
    async for event in stream:
        events.append(event)
        arrived.append(time.perf_counter())

    annotated = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert [e.type for e in events if e not in annotated] == [t for t in STREAM_EVENTS if "annotation" not in t]
    assert events.index(annotated[0]) == 4 + len(TOKENS) and len(annotated) > 1  # after the text, before its end
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert [e.delta for e in deltas] == TOKENS  # one event per model delta, in order
    # Strict streaming: delta k reached the client before the scripted model even wrote token k+1.
    sent = scripted_llm.token_sent_at[0]
    delta_arrivals = [t for t, e in zip(arrived, events, strict=True) if e.type == "response.output_text.delta"]
    for k in range(len(TOKENS) - 1):
        assert delta_arrivals[k] < sent[k + 1], f"delta {k} was held back until token {k + 1} was sent"

    completed = events[-1]
    assert completed.type == "response.completed" and completed.response.output_text == ANSWER
    part = completed.response.output[0].content[0]
    annotations = [a.model_dump() for a in part.annotations]
    assert [e.annotation.model_dump() for e in annotated] == annotations  # type: ignore[union-attr]
    assert [e.annotation_index for e in annotated] == list(range(len(annotated)))
    await assert_cites_history(http, part.text, annotations)
    usage = completed.response.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (734, 9, 743)
    assert {e.item_id for e in deltas} == {completed.response.output[0].id}
    messages = await stored_when(http, session, 2)
    assert [(m["role"], m["content"], m["completed"]) for m in messages][1] == ("assistant", ANSWER, True)


async def test_the_raw_stream_names_each_event_and_lf_frames_it(
    http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Hi", " there"]))
    body = {"model": "general", "stream": True, "input": "hello!"}
    async with http.stream("POST", "/v1/responses", json=body) as response:
        raw = b"".join([part async for part in response.aiter_raw()])
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-session-id"].startswith("oai-")
    frames = [frame.split(b"\n") for frame in raw.split(b"\n\n") if frame]
    assert b"\r" not in raw and all(len(frame) == 2 for frame in frames)
    names = [frame[0].removeprefix(b"event: ").decode() for frame in frames]
    assert all(f'"type":"{name}"'.encode() in frame[1] for name, frame in zip(names, frames, strict=True))
    assert names.count("response.output_text.delta") == 2 and names[-1] == "response.completed"
    assert "response.output_text.annotation.added" not in names  # general chat: no sources
    assert b"[DONE]" not in raw  # the Responses API ends with response.completed


async def test_a_model_failure_mid_stream_ends_with_response_failed_and_keeps_the_partial_answer(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2))
    session = session_id()
    stream = await sdk.responses.create(
        model=MODEL, input=FOUNDED, stream=True, extra_headers={"X-Session-ID": session}
    )
    events = [event async for event in stream]
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.code == "model_error"
    assert "model" in failed.response.error.message
    assert failed.response.output_text == "Founded in"
    assert "response.completed" not in {e.type for e in events}
    messages = await stored_when(http, session, 2)
    assert (messages[1]["content"], messages[1]["completed"]) == ("Founded in", False)


async def test_a_conversation_keeps_one_session_across_both_endpoints(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Agnes", " Wren."]), Reply(tokens=["Ruth", " Wren."]))
    first = await sdk.chat.completions.with_raw_response.create(
        model="general", messages=[{"role": "user", "content": FOUNDED}]
    )
    second = await sdk.responses.with_raw_response.create(
        model="general",
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": FOUNDED},
            {"type": "reasoning", "id": "rs_1", "summary": []},  # an item with no text for the model: skipped
            {"role": "assistant", "content": "Agnes Wren, in 1921."},
            {"role": "user", "content": WHO_RUNS},
        ],
    )
    assert second.parse().output_text == "Ruth Wren."
    received = scripted_llm.requests[1]["messages"]
    assert [(m["role"], m["content"]) for m in received[1:]] == [
        ("user", FOUNDED),
        ("assistant", "Agnes Wren, in 1921."),  # the client's version of the answer
        ("user", WHO_RUNS),
    ]
    session = first.headers["x-session-id"]
    assert session.startswith("oai-") and second.headers["x-session-id"] == session
    contents = [m["content"] for m in await stored_when(http, session, 4)]
    assert contents == [FOUNDED, "Agnes Wren.", WHO_RUNS, "Ruth Wren."]


# -- langchain-openai -------------------------------------------------------------------------------


def answers_the_follow_up(body: dict[str, Any]) -> Reply:
    asked = str(body["messages"][-1]["content"])
    return Reply(tokens=["Ruth", " Wren", " [1]."]) if asked.endswith(f"Question: {WHO_RUNS}") else Reply([WHO_RUNS])


@pytest.fixture
def langchain(server: LiveServer) -> ChatOpenAI:
    return chat_openai(server, default_headers={"X-Session-ID": session_id()})


async def test_chat_openai_invoke_surfaces_the_annotations_and_the_usage(
    langchain: ChatOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS, usage=REPORTED))
    message = await langchain.ainvoke(FOUNDED)
    assert isinstance(message, AIMessage) and message.text == ANSWER
    [block] = [b for b in message.content if isinstance(b, dict) and b["type"] == "text"]
    await assert_cites_history(http, block["text"], block["annotations"])
    assert message.usage_metadata is not None
    assert (message.usage_metadata["input_tokens"], message.usage_metadata["output_tokens"]) == (734, 9)
    assert message.usage_metadata["total_tokens"] == 743

    # The answer, annotations and all, goes back as history on the next turn; the model gets its text.
    follow_up: list[BaseMessage] = [HumanMessage(FOUNDED), message, HumanMessage(WHO_RUNS)]
    scripted_llm.responder = answers_the_follow_up  # the router may first ask the model to rewrite the question
    second = await langchain.ainvoke(follow_up)
    assert second.text == "Ruth Wren [1]."
    received = scripted_llm.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in received[1:-1]] == [("user", FOUNDED), ("assistant", ANSWER)]
    assert received[-1]["content"].endswith(f"Question: {WHO_RUNS}")
    session = langchain.default_headers["X-Session-ID"]  # type: ignore[index]
    assert [m["content"] for m in await stored_when(http, session, 4)][::2] == [FOUNDED, WHO_RUNS]


async def test_chat_openai_stream_surfaces_the_text_as_it_comes_then_the_annotations_and_the_usage(
    langchain: ChatOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS, usage=REPORTED))
    chunks = [chunk async for chunk in langchain.astream(FOUNDED)]
    assert [chunk.text for chunk in chunks if chunk.text] == TOKENS
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert isinstance(whole, AIMessageChunk) and whole.text == ANSWER
    [block] = [b for b in whole.content if isinstance(b, dict) and b.get("type") == "text"]
    await assert_cites_history(http, block["text"], block["annotations"])
    assert whole.usage_metadata is not None
    assert (whole.usage_metadata["input_tokens"], whole.usage_metadata["output_tokens"]) == (734, 9)


async def test_chat_openai_raises_a_response_that_failed_mid_stream(
    langchain: ChatOpenAI, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2))
    received: list[str] = []
    with pytest.raises(ValueError, match="model_error"):
        async for chunk in langchain.astream(FOUNDED):
            received.append(chunk.text)
    assert "".join(received) == "Founded in"


# -- without a model, and counted usage ------------------------------------------------------------


async def test_a_model_that_reports_no_usage_gets_the_estimate_of_what_it_was_sent_and_wrote(
    sdk: openai.AsyncOpenAI, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=TOKENS, usage={}))  # a usage chunk without counts
    usage = (await sdk.responses.create(model=MODEL, input=FOUNDED)).usage
    sent = scripted_llm.requests[0]["messages"]
    assert usage is not None
    assert usage.input_tokens == sum(estimate_tokens(message["content"]) for message in sent)
    assert usage.output_tokens == estimate_tokens(ANSWER) > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


async def test_without_a_model_the_extractive_answer_is_cited_and_counted(data_dir: Path) -> None:
    with live_server(make_settings(data_dir)) as running:
        async with (
            openai.AsyncOpenAI(base_url=running.base_url + "/v1", api_key="k", max_retries=0) as offline,
            httpx.AsyncClient(base_url=running.base_url) as http,
        ):
            whole = await offline.responses.create(model=MODEL, input=FOUNDED)
            events = [event async for event in await offline.responses.create(model=MODEL, input=FOUNDED, stream=True)]
            part = whole.output[0].content[0]
            assert part.text.startswith("Extractive answer") and "1921" in part.text
            await assert_cites_history(http, part.text, [a.model_dump() for a in part.annotations])
    usage = whole.usage
    assert usage is not None and usage.output_tokens == estimate_tokens(part.text)
    assert usage.input_tokens > estimate_tokens(FOUNDED)  # the question and the sources it quoted from
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == part.text and completed.response.usage == usage


# -- errors -----------------------------------------------------------------------------------------

IMAGE = {"type": "input_image", "image_url": "https://x/y.png"}
BAD_INPUT: list[tuple[Any, str]] = [
    ("   ", "input"),
    ([], "input"),
    ([{"role": "developer", "content": "instructions only"}], "input"),
    ([{"role": "user", "content": [IMAGE]}], "input[0].content[0]"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "continue me"}], "input[1]"),
    ([{"type": "item_reference", "id": "msg_1"}, {"role": "user", "content": "q"}], "input[0].type"),
    ([{"role": "tool", "content": "q"}], "input[0].role"),
    ([{"role": "user", "content": 7}], "input[0].content"),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("given", "param"), BAD_INPUT)
async def test_unusable_input_is_a_bad_request_and_nothing_is_stored(
    sdk: openai.AsyncOpenAI,
    http: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    given: Any,
    param: str,
    stream: bool,
) -> None:
    session = session_id()
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="auto", input=given, stream=stream, extra_headers={"X-Session-ID": session})
    error = raised.value
    assert (error.status_code, error.type, error.param, error.code) == (
        400,
        "invalid_request_error",
        param,
        "invalid_messages",
    )
    assert (await http.get(f"/api/v1/conversations/{session}/messages")).status_code == 404
    assert scripted_llm.requests == []


@pytest.mark.parametrize("field", ["previous_response_id", "conversation"])
async def test_stored_state_is_refused_clearly(sdk: openai.AsyncOpenAI, scripted_llm: ScriptedLLM, field: str) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="general", input="hi", **{field: "resp_123"})  # type: ignore[arg-type]
    assert (raised.value.param, raised.value.code) == (field, "unsupported_parameter")
    assert "send the whole conversation in `input`" in raised.value.message
    assert scripted_llm.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unknown_model_is_not_found(sdk: openai.AsyncOpenAI, stream: bool) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        await sdk.responses.create(model="gpt-4o", input="hi", stream=stream)
    assert (raised.value.code, raised.value.param) == ("model_not_found", "model")


async def test_a_model_failure_without_streaming_is_a_server_error_and_is_recorded(
    sdk: openai.AsyncOpenAI, http: httpx.AsyncClient, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(status=500, error_message="upstream exploded"))
    session = session_id()
    with pytest.raises(openai.InternalServerError) as raised:
        await sdk.responses.create(model="general", input="hi", extra_headers={"X-Session-ID": session})
    assert (raised.value.status_code, raised.value.code) == (502, "model_error")
    messages = await stored_when(http, session, 2)
    assert (messages[1]["role"], messages[1]["completed"]) == ("assistant", False)


async def test_a_client_leaving_mid_stream_stops_the_model(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=[f"t{i} " for i in range(40)], delay_s=0.05))
    session = session_id()
    body = {"model": MODEL, "stream": True, "input": FOUNDED}
    deltas = 0
    async with http.stream("POST", "/v1/responses", json=body, headers={"X-Session-ID": session}) as response:
        async for line in response.aiter_lines():
            deltas += line == "event: response.output_text.delta"
            if deltas == 3:
                break
    assert await scripted_llm.wait_outcome(0, within_s=5) == "disconnected"
    messages = await stored_when(http, session, 2)
    assert messages[1]["completed"] is False and len(messages[1]["content"].split()) < 40
