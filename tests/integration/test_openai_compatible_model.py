"""OpenAICompatibleChatModel against the scripted server: real HTTP, real SSE, real SDK code paths."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import traceback
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from backend.application.ports.chat_model import ChatModel, ModelDelta
from backend.domain.conversation import Message, Role
from backend.domain.errors import ModelError
from backend.domain.tokens import TokenUsage
from backend.infrastructure.llm import OpenAICompatibleChatModel
from tests.support.scripted_llm import Reply, ScriptedLLM

API_KEY = "sk-test-SECRET-0123456789"
QUESTION = [Message(Role.SYSTEM, "Be brief."), Message(Role.USER, "What is GraphRAG?")]
FAST_RETRY = {"retry-after-ms": "10"}  # the SDK honours it, so retry tests do not sleep for seconds

ModelFactory = Callable[..., OpenAICompatibleChatModel]


@pytest.fixture
async def make_model(scripted_llm: ScriptedLLM) -> AsyncIterator[ModelFactory]:
    models: list[OpenAICompatibleChatModel] = []

    def make(**overrides: Any) -> OpenAICompatibleChatModel:
        options: dict[str, Any] = {
            "base_url": scripted_llm.base_url,
            "api_key": API_KEY,
            "model": "scripted-model",
        }
        model = OpenAICompatibleChatModel(**(options | overrides))
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


async def collect(model: ChatModel, into: list[ModelDelta] | None = None) -> list[ModelDelta]:
    deltas = [] if into is None else into
    async for delta in model.stream(QUESTION):
        deltas.append(delta)
    return deltas


def contents(deltas: list[ModelDelta]) -> list[str]:
    return [d.content for d in deltas if d.content]


async def test_stream_yields_one_delta_per_token_in_order(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    tokens = ["Graph", "RAG", " ", "uses", " 知识图谱", "\n", "!"]
    scripted_llm.script(Reply(tokens=tokens))

    deltas = await collect(make_model())

    assert [d.content for d in deltas[:-1]] == tokens  # no merging, no splitting, nothing empty
    assert deltas[-1].usage is not None and deltas[-1].content == ""
    request = scripted_llm.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is GraphRAG?"},
    ]
    assert request["model"] == "scripted-model"
    assert request["temperature"] == 0.2
    assert "max_tokens" not in request
    assert scripted_llm.exchanges[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_reasoning_deltas_come_before_content(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(reasoning=["Think", "ing..."], tokens=["Answer"]))

    deltas = await collect(make_model())

    assert [(d.reasoning, d.content) for d in deltas if d.usage is None] == [
        ("Think", ""),
        ("ing...", ""),
        ("", "Answer"),
    ]


async def test_usage_is_reported(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    scripted_llm.script(Reply(usage=usage | {"prompt_tokens_details": {"cached_tokens": 0}}))

    deltas = await collect(make_model())

    assert [d.usage for d in deltas if d.usage] == [TokenUsage(11, 3)]  # reported once, as the server counted
    assert deltas[-1].usage == TokenUsage(11, 3, counted=False)


async def test_usage_without_prompt_and_completion_counts_is_not_reported(
    make_model: ModelFactory, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(usage={"total_tokens": 14}))

    deltas = await collect(make_model())

    assert [d.usage for d in deltas] == [None] * len(deltas) and deltas


async def test_max_tokens_is_sent_when_set(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    await collect(make_model(max_tokens=64, temperature=0.0))

    assert scripted_llm.requests[0]["max_tokens"] == 64
    assert scripted_llm.requests[0]["temperature"] == 0.0


async def test_complete_returns_the_whole_answer(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(content="GraphRAG retrieves over a knowledge graph."))
    model = make_model()

    answer = await model.complete(QUESTION)

    assert answer == "GraphRAG retrieves over a knowledge graph."
    assert type(answer) is str
    assert not scripted_llm.requests[0].get("stream")
    assert scripted_llm.requests[0]["messages"][1] == {"role": "user", "content": "What is GraphRAG?"}
    assert scripted_llm.exchanges[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert model.model_name == "scripted-model"


async def test_complete_error_becomes_model_error(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(status=503, error_message="warming up"))

    with pytest.raises(ModelError, match=r"HTTP 503: warming up"):
        await make_model(max_retries=0).complete(QUESTION)


async def test_a_500_before_the_first_token_is_retried(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(status=500, error_message="transient", headers=FAST_RETRY), Reply(tokens=["ok"]))

    deltas = await collect(make_model(max_retries=2))

    assert contents(deltas) == ["ok"]
    assert len(scripted_llm.requests) == 2


async def test_a_persistent_500_is_a_model_error(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.default = Reply(status=500, error_message="upstream exploded", headers=FAST_RETRY)

    with pytest.raises(ModelError, match=r"HTTP 500: upstream exploded") as caught:
        await collect(make_model(max_retries=2))

    assert len(scripted_llm.requests) == 3
    assert caught.value.code == "model_error"


async def test_a_429_waits_as_long_as_the_server_asks(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(status=429, error_message="slow down", headers={"retry-after-ms": "400"}))
    started = time.perf_counter()

    deltas = await collect(make_model(max_retries=1))

    assert 0.4 <= time.perf_counter() - started < 3.0
    assert contents(deltas) == ["Hello", " world", "!"]
    assert len(scripted_llm.requests) == 2


async def test_the_server_can_forbid_a_retry(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.default = Reply(status=503, error_message="over capacity", headers={"x-should-retry": "false"})

    with pytest.raises(ModelError, match=r"HTTP 503: over capacity"):
        await collect(make_model(max_retries=2))

    assert len(scripted_llm.requests) == 1


async def test_stream_and_complete_share_one_connection_pool(
    make_model: ModelFactory, scripted_llm: ScriptedLLM
) -> None:
    model = make_model()
    scripted_llm.script(Reply(tokens=["a"]), Reply(content="b"), Reply(tokens=["c"]))

    assert contents(await collect(model)) == ["a"]
    assert await model.complete(QUESTION) == "b"
    assert contents(await collect(model)) == ["c"]

    # keep-alive: the three calls reused the first connection
    assert len({exchange.client_port for exchange in scripted_llm.exchanges}) == 1


@pytest.mark.parametrize("status", [400, 401])
async def test_client_errors_are_not_retried_and_hide_the_key(
    make_model: ModelFactory, scripted_llm: ScriptedLLM, status: int
) -> None:
    # Some servers echo the rejected key; it must not reach our error, its traceback or the logs.
    scripted_llm.default = Reply(status=status, error_message=f"bad key {API_KEY} for this request")

    with pytest.raises(ModelError) as caught:
        await collect(make_model(max_retries=2))

    assert len(scripted_llm.requests) == 1
    assert f"HTTP {status}" in caught.value.message
    assert "bad key *** for this request" in caught.value.message
    assert API_KEY not in "".join(traceback.format_exception(caught.value))


async def test_connection_refused_is_a_model_error(make_model: ModelFactory) -> None:
    with socket.socket() as probe:  # a port that nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = make_model(base_url=f"http://user:pw@127.0.0.1:{port}/v1", max_retries=0)

    with pytest.raises(ModelError, match="cannot reach the model server") as caught:
        await collect(model)

    assert f"127.0.0.1:{port}" in caught.value.message
    assert "refused" in caught.value.message.lower()
    assert "pw" not in caught.value.message and API_KEY not in caught.value.message


async def test_dropped_connection_after_some_tokens(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["one", " two", " three", " four"], drop_after=2))
    received: list[ModelDelta] = []

    with pytest.raises(ModelError, match="model stream interrupted"):
        await collect(make_model(), into=received)

    assert contents(received) == ["one", " two"]
    assert len(scripted_llm.requests) == 1  # never retried once the stream has started


async def test_stall_is_detected_within_the_idle_timeout(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], stall_after=1, stall_s=30))
    received: list[ModelDelta] = []
    first_token_at = 0.0

    async def consume() -> None:
        nonlocal first_token_at
        async for delta in make_model(stream_idle_timeout_s=0.5).stream(QUESTION):
            first_token_at = first_token_at or time.perf_counter()
            received.append(delta)

    with pytest.raises(ModelError, match=r"model stream stalled for 0.5 s"):
        await consume()

    waited = time.perf_counter() - first_token_at
    assert 0.4 <= waited < 1.5
    assert contents(received) == ["a"]
    assert await scripted_llm.wait_outcome(0) == "disconnected"  # the adapter hung up


async def test_in_stream_error_object(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], stream_error_after=1, error_message="model overloaded"))
    received: list[ModelDelta] = []

    with pytest.raises(ModelError, match="model stream reported an error: model overloaded"):
        await collect(make_model(), into=received)

    assert contents(received) == ["a"]


async def test_malformed_json_line(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], malformed_after=1))

    with pytest.raises(ModelError, match="malformed JSON"):
        await collect(make_model())


async def test_stream_ending_without_finish_is_an_error(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b"], end_after=1))
    received: list[ModelDelta] = []

    with pytest.raises(ModelError, match="ended before the model finished"):
        await collect(make_model(), into=received)

    assert contents(received) == ["a"]


async def test_cancelling_the_consumer_closes_the_response(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=[f"t{i}" for i in range(50)], delay_s=0.05))
    model = make_model()
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(QUESTION):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    assert task.cancelled()
    assert await scripted_llm.wait_outcome(0, within_s=2) == "disconnected"
    assert len(scripted_llm.token_sent_at[0]) < 50
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_stopping_iteration_closes_the_response(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=[f"t{i}" for i in range(50)], delay_s=0.05))
    model = make_model()

    async with contextlib.aclosing(model.stream(QUESTION)) as stream:
        async for delta in stream:
            if delta.content == "t1":
                break

    assert await scripted_llm.wait_outcome(0, within_s=2) == "disconnected"
    assert len(scripted_llm.token_sent_at[0]) < 50
    # The pool is still usable: the next call gets a fresh answer.
    scripted_llm.script(Reply(tokens=["again"]))
    assert contents(await collect(model)) == ["again"]


async def test_tokens_arrive_as_they_are_emitted(make_model: ModelFactory, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(Reply(tokens=["a", "b", "c", "d"], delay_s=0.2))
    received_at: list[float] = []

    async for delta in make_model().stream(QUESTION):
        if delta.content:
            received_at.append(time.perf_counter())

    sent_at = scripted_llm.token_sent_at[0]
    assert len(received_at) == len(sent_at) == 4
    for k in range(3):
        # token k is in the consumer's hands long before the server even writes token k+1
        assert received_at[k] < sent_at[k + 1] - 0.1
        assert received_at[k] - sent_at[k] < 0.1


async def test_aclose_is_idempotent_and_the_model_reopens(make_model: ModelFactory) -> None:
    model = make_model()
    assert contents(await collect(model)) == ["Hello", " world", "!"]

    await model.aclose()
    await model.aclose()

    assert contents(await collect(model)) == ["Hello", " world", "!"]
    assert "SECRET" not in repr(model)


async def test_cancelling_while_waiting_for_the_response_headers_ends_cleanly(make_model: ModelFactory) -> None:
    accepted = asyncio.Event()
    hung_up = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        await reader.read()  # returns when the client closes the connection
        hung_up.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    task = asyncio.create_task(collect(model))
    try:
        await asyncio.wait_for(accepted.wait(), 5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

        assert task.cancelled()  # not retried, not turned into a ModelError
        await asyncio.wait_for(hung_up.wait(), 5)  # the request's connection was closed
    finally:
        server.close()
        await server.wait_closed()
