"""Model faults over real HTTP (the scripted OpenAI-compatible server): 5xx before the first token, a connection
dropped mid-stream, a stall longer than the idle timeout. The client always sees `error` then `done`, and the
partial answer is stored exactly once, marked not completed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.domain.errors import ModelError
from tests.faults.helpers import error_messages, messages, new_session
from tests.support.fault_report import outcome, owed
from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import read_stream

FOUNDED = "When was Wrenfield Orchard founded, and by whom?"


def _server(data_dir: Path, llm: ScriptedLLM, **overrides: Any) -> Any:
    return live_server(make_settings(data_dir, **(llm_settings(llm) | overrides)))


async def test_a_5xx_before_the_first_token_is_retried_with_backoff(
    data_dir: Path, scripted_llm: ScriptedLLM, fault_report: Any
) -> None:
    arrivals: list[float] = []
    replies = [Reply(status=503, error_message="overloaded"), Reply(status=502), Reply(tokens=["Founded", " 1921."])]

    def respond(body: dict[str, Any]) -> Reply:
        arrivals.append(time.monotonic())
        return replies[len(arrivals) - 1]

    scripted_llm.responder = respond
    session = new_session()
    with _server(data_dir, scripted_llm, LLM_MAX_RETRIES=2) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            capture = await read_stream(http, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})
            stored = await messages(http, session)

    assert outcome(capture) == "done" and capture.text == "Founded 1921."
    assert len(arrivals) == 3
    # The SDK's exponential backoff (0.5 s, then 1 s, less up to 25 % jitter): each wait longer than the last.
    first_wait, second_wait = arrivals[1] - arrivals[0], arrivals[2] - arrivals[1]
    assert first_wait >= 0.35, first_wait
    assert second_wait > first_wait, (first_wait, second_wait)
    assert [(m["role"], m["content"], m["completed"]) for m in stored] == [
        ("user", FOUNDED, True),
        ("assistant", "Founded 1921.", True),
    ]
    fault_report(
        "Model HTTP 5xx before the first token",
        "scripted model answers 503, then 502, then streams",
        requests=1,
        messages_expected=owed(capture),
        messages_stored=len(stored),
        outcomes=[outcome(capture)],
        notes=f"3 model calls; backoff waits {first_wait:.2f} s, then {second_wait:.2f} s",
    )


async def test_a_5xx_that_outlasts_the_retries_is_an_error_then_done(
    data_dir: Path, scripted_llm: ScriptedLLM, fault_report: Any, caplog: pytest.LogCaptureFixture
) -> None:
    scripted_llm.default = Reply(status=500, error_message="upstream exploded", headers={"retry-after-ms": "10"})
    session = new_session()
    with _server(data_dir, scripted_llm, LLM_MAX_RETRIES=1) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            capture = await read_stream(http, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})
            stored = await messages(http, session)

    assert len(scripted_llm.requests) == 2  # the first call and one retry
    assert capture.statuses[-2:] == ["error", "done"]
    # The client reads the model error's fixed text; what the model server said is in the request's log line.
    assert error_messages(capture) == [ModelError.public_text]
    request_id = capture.headers["x-request-id"]
    assert any(request_id in line and "HTTP 500" in line and "upstream exploded" in line for line in caplog.messages)
    assert "token" not in capture.statuses
    assert [(m["role"], m["content"], m["completed"]) for m in stored] == [
        ("user", FOUNDED, True),
        ("assistant", "", False),
    ]
    assert capture.events[-1]["message_id"] == stored[1]["id"]
    fault_report(
        "Model HTTP 5xx on every attempt",
        "scripted model answers 500 to the call and its retry (LLM_MAX_RETRIES=1)",
        requests=1,
        messages_expected=owed(capture),
        messages_stored=len(stored),
        outcomes=[outcome(capture)],
        notes=f"2 model calls; error: {error_messages(capture)[0]!r}; empty answer stored once, completed=false",
    )


@pytest.mark.parametrize(
    ("fault", "injected", "reply", "expected_outcome", "says"),
    [
        (
            "Model connection dropped mid-stream",
            "scripted model closes the connection after 2 tokens",
            Reply(tokens=["Founded", " in", " 19", "21"], drop_after=2),
            "dropped",
            "model stream interrupted",
        ),
        (
            "Model stalls longer than the idle timeout",
            "scripted model sends nothing for 30 s after 2 tokens (LLM_STREAM_IDLE_TIMEOUT_S=0.5)",
            Reply(tokens=["Founded", " in", " 19", "21"], stall_after=2, stall_s=30),
            "disconnected",  # the adapter hung up on the stalled call
            "stalled for 0.5 s",
        ),
    ],
    ids=["dropped", "stalled"],
)
async def test_a_model_failure_mid_stream_is_error_then_done_and_the_partial_answer_is_stored_once(
    data_dir: Path,
    scripted_llm: ScriptedLLM,
    fault_report: Any,
    fault: str,
    injected: str,
    reply: Reply,
    expected_outcome: str,
    says: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scripted_llm.script(reply)
    session = new_session()
    with _server(data_dir, scripted_llm, LLM_STREAM_IDLE_TIMEOUT_S=0.5) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            started = time.monotonic()
            capture = await read_stream(http, "/api/v1/chat/stream", {"session_id": session, "message": FOUNDED})
            took = time.monotonic() - started
            # A second turn in the same session: the failed one must not have left anything pending or doubled.
            scripted_llm.script(Reply(tokens=["ok"]))
            after = await read_stream(
                http, "/api/v1/chat/stream", {"session_id": session, "message": "and then?", "kb_prefix": "general"}
            )
            stored = await messages(http, session)

    assert await scripted_llm.wait_outcome(0) == expected_outcome
    assert len(scripted_llm.requests) == 2  # a started stream is never retried
    assert took < 10
    assert capture.statuses[-2:] == ["error", "done"] and capture.statuses.count("done") == 1
    assert error_messages(capture) == [ModelError.public_text]
    assert any(capture.headers["x-request-id"] in line and says in line for line in caplog.messages), caplog.messages
    assert capture.text == "Founded in"
    assert outcome(after) == "done"
    assert [(m["role"], m["content"], m["completed"]) for m in stored] == [
        ("user", FOUNDED, True),
        ("assistant", "Founded in", False),
        ("user", "and then?", True),
        ("assistant", "ok", True),
    ]
    assert capture.events[-1]["message_id"] == stored[1]["id"]
    assert stored[1]["debug"]["error"] == ModelError.public_text  # its owner reads it back: no cause either
    fault_report(
        fault,
        injected,
        requests=2,
        messages_expected=owed(capture) + owed(after),
        messages_stored=len(stored),
        outcomes=[outcome(capture), outcome(after)],
        notes=f"error then done {took:.2f} s after the request; partial answer stored once, completed=false",
    )
