"""The scripted model server itself: OpenAI's frames, errors, drops, stalls, models and embeddings."""

from __future__ import annotations

import base64
import itertools
import json
import math
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.scripted_llm import Reply, ScriptedLLM, embed_text

CHAT = "/chat/completions"


def chat_body(*, stream: bool = True, usage: bool = True, content: str = "two words") -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m-1",
        "messages": [{"role": "user", "content": content}],
        "stream": stream,
    }
    if stream and usage:
        body["stream_options"] = {"include_usage": True}
    return body


@pytest.fixture
async def http(scripted_llm: ScriptedLLM) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=scripted_llm.base_url, timeout=10) as client:
        yield client


def data_lines(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


async def test_stream_uses_openai_frames(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["Hel", "lo", " 世界"]))
    response = await http.post(CHAT, json=chat_body())

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.text.endswith("data: [DONE]\n\n")
    assert "\r" not in response.text  # LF-framed SSE
    *frames, done = data_lines(response.text)
    assert done == "[DONE]"
    chunks = [json.loads(frame) for frame in frames]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert {c["model"] for c in chunks} == {"m-1"}
    first, *tokens, final, usage = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"] for c in tokens] == [{"content": t} for t in ["Hel", "lo", " 世界"]]
    assert {c["choices"][0]["finish_reason"] for c in tokens} == {None}
    assert final["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert {c["usage"] for c in chunks[:-1]} == {None}  # OpenAI sends usage: null until the last chunk


async def test_stream_without_include_usage_has_no_usage(http: httpx.AsyncClient) -> None:
    response = await http.post(CHAT, json=chat_body(usage=False))

    chunks = [json.loads(frame) for frame in data_lines(response.text)[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_reasoning_streams_before_content(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(reasoning=["Let me", " think"], tokens=["Yes"]))
    response = await http.post(CHAT, json=chat_body())

    deltas = [json.loads(f)["choices"][0]["delta"] for f in data_lines(response.text)[1:-3]]
    assert deltas == [{"reasoning_content": "Let me"}, {"reasoning_content": " think"}, {"content": "Yes"}]
    usage = json.loads(data_lines(response.text)[-2])["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}


async def test_non_streaming_returns_a_chat_completion(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"]), Reply(content="whole answer", usage={"total_tokens": 7}))
    first = (await http.post(CHAT, json=chat_body(stream=False))).json()
    second = (await http.post(CHAT, json=chat_body(stream=False))).json()

    assert first["object"] == "chat.completion"
    assert first["choices"][0]["message"] == {"role": "assistant", "content": "ab"}
    assert first["choices"][0]["finish_reason"] == "stop"
    assert first["usage"]["completion_tokens"] == 2
    assert second["choices"][0]["message"]["content"] == "whole answer"
    assert second["usage"] == {"total_tokens": 7}


async def test_error_status_has_openai_error_body(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(status=429, error_message="slow down", headers={"retry-after-ms": "5"}))
    response = await http.post(CHAT, json=chat_body())

    assert response.status_code == 429
    assert response.headers["retry-after-ms"] == "5"
    error = response.json()["error"]
    assert error["message"] == "slow down"
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "rate_limit_exceeded"


async def test_queue_then_responder_then_default(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(content="queued"))
    scripted_llm.responder = lambda body: Reply(content="echo " + body["messages"][-1]["content"])
    answers = []
    for text in ["one", "two"]:
        reply = await http.post(CHAT, json=chat_body(stream=False, content=text))
        answers.append(reply.json()["choices"][0]["message"]["content"])
    scripted_llm.responder = None
    reply = await http.post(CHAT, json=chat_body(stream=False))
    answers.append(reply.json()["choices"][0]["message"]["content"])

    assert answers == ["queued", "echo two", "Hello world!"]
    assert [r["messages"][0]["content"] for r in scripted_llm.requests] == ["one", "two", "two words"]


async def test_reset_forgets_everything(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(content="left over"))
    scripted_llm.default = Reply(content="custom default")
    scripted_llm.responder = lambda body: Reply(content="responder")
    await http.post(CHAT, json=chat_body(stream=False))
    assert len(scripted_llm.requests) == 1

    scripted_llm.reset()
    reply = await http.post(CHAT, json=chat_body(stream=False))

    assert reply.json()["choices"][0]["message"]["content"] == "Hello world!"
    assert len(scripted_llm.requests) == 1


async def test_drop_closes_the_connection_mid_body(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b", "c"], drop_after=2))
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with http.stream("POST", CHAT, json=chat_body()) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    received.append(line)

    contents = [json.loads(line[6:])["choices"][0]["delta"].get("content") for line in received]
    assert contents == ["", "a", "b"]
    assert await scripted_llm.wait_outcome(0) == "dropped"


async def test_stall_pauses_then_resumes(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b", "c"], stall_after=1, stall_s=0.3))
    response = await http.post(CHAT, json=chat_body())

    sent = scripted_llm.token_sent_at[0]
    assert response.text.endswith("data: [DONE]\n\n")
    assert sent[1] - sent[0] >= 0.3
    assert sent[2] - sent[1] < 0.2


async def test_stall_ends_when_the_client_leaves(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], stall_after=1, stall_s=60))
    async with http.stream("POST", CHAT, json=chat_body()) as response:
        async for line in response.aiter_lines():
            if '"content":"a"' in line:
                break
    started = time.monotonic()

    assert await scripted_llm.wait_outcome(0, within_s=5) == "disconnected"
    assert time.monotonic() - started < 2
    assert len(scripted_llm.token_sent_at[0]) == 1


async def test_in_stream_error_object(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], stream_error_after=1, error_message="overloaded"))
    response = await http.post(CHAT, json=chat_body())

    *_, error_frame, done = data_lines(response.text)
    assert json.loads(error_frame)["error"]["message"] == "overloaded"
    assert done == "[DONE]"
    assert len(scripted_llm.token_sent_at[0]) == 1


async def test_malformed_line_then_the_rest(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], malformed_after=1))
    response = await http.post(CHAT, json=chat_body())

    frames = data_lines(response.text)
    broken = [frame for frame in frames if frame != "[DONE]" and not _is_json(frame)]
    assert len(broken) == 1
    assert frames.index(broken[0]) == 2  # after the role chunk and token "a"
    assert frames[-1] == "[DONE]"


async def test_end_after_stops_cleanly_without_finish(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], end_after=1))
    response = await http.post(CHAT, json=chat_body())

    frames = data_lines(response.text)
    assert [json.loads(f)["choices"][0]["delta"] for f in frames] == [
        {"role": "assistant", "content": ""},
        {"content": "a"},
    ]
    assert await scripted_llm.wait_outcome(0) == "completed"


async def test_delay_spaces_the_tokens(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b", "c"], delay_s=0.05))
    await http.post(CHAT, json=chat_body())

    sent = scripted_llm.token_sent_at[0]
    assert all(later - earlier >= 0.045 for earlier, later in itertools.pairwise(sent))


async def test_thousands_of_tokens_arrive_in_order(http: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    tokens = [f" t{i}" for i in range(3000)]
    scripted_llm.script(Reply(tokens=tokens))
    response = await http.post(CHAT, json=chat_body(usage=False))

    contents = [json.loads(f)["choices"][0]["delta"].get("content") for f in data_lines(response.text)[1:-2]]
    assert contents == tokens


async def test_models(http: httpx.AsyncClient) -> None:
    body = (await http.get("/models")).json()

    assert body["object"] == "list"
    assert [model["id"] for model in body["data"]] == ["scripted-model"]


async def test_unknown_route_is_404(http: httpx.AsyncClient) -> None:
    response = await http.post("/completions", json={})

    assert response.status_code == 404
    assert "no route" in response.json()["error"]["message"]


async def test_embeddings_are_deterministic_and_normalised(http: httpx.AsyncClient) -> None:
    texts = ["graph retrieval works", "graph retrieval works", "bananas are yellow", "知识图谱"]
    body = (await http.post("/embeddings", json={"model": "e", "input": texts, "encoding_format": "float"})).json()

    vectors = [item["embedding"] for item in body["data"]]
    assert [item["index"] for item in body["data"]] == [0, 1, 2, 3]
    assert vectors[0] == vectors[1] == embed_text(texts[0], 64)
    assert all(len(v) == 64 and math.isclose(sum(x * x for x in v), 1.0) for v in vectors)
    assert vectors[0] != vectors[2]


async def test_embeddings_base64_and_dimensions(http: httpx.AsyncClient) -> None:
    request = {"model": "e", "input": "graph", "encoding_format": "base64", "dimensions": 16}
    body = (await http.post("/embeddings", json=request)).json()

    raw = base64.b64decode(body["data"][0]["embedding"])
    decoded = struct.unpack("<16f", raw)
    assert decoded == pytest.approx(embed_text("graph", 16), abs=1e-6)


def test_embedding_similarity_follows_shared_words() -> None:
    def cosine(a: str, b: str) -> float:
        return sum(x * y for x, y in zip(embed_text(a, 256), embed_text(b, 256), strict=True))

    assert cosine("neo4j graph database", "graph database") > cosine("neo4j graph database", "tropical fruit")


async def test_a_second_server_runs_and_stops(scripted_llm: ScriptedLLM) -> None:
    async with httpx.AsyncClient() as client:
        with ScriptedLLM(models=("other",)) as other:
            response = await client.get(other.base_url + "/models")
        assert other.port != scripted_llm.port
        assert response.json()["data"][0]["id"] == "other"
        with pytest.raises(httpx.ConnectError):
            await client.get(other.base_url + "/models")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
