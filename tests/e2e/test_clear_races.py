"""Clears racing streams in one conversation: no answer outlives its cleared question, every stream still ends with
`done`, and the next turn's history holds nothing from before the clear. On SQLite and on Postgres (real server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import stored_messages
from tests.support.live_server import LiveServer, live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.sse import StreamCapture, read_stream

STREAMS = 30
CLEARS = 10


@pytest.fixture
def running(history_store: dict[str, Any], data_dir: Path, scripted_llm: ScriptedLLM) -> Iterator[LiveServer]:
    with live_server(make_settings(data_dir, **history_store, **llm_settings(scripted_llm))) as server:
        yield server


async def test_clears_racing_streams_leave_no_answer_without_its_question(
    running: LiveServer, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.default = Reply(tokens=["Every", " answer", " takes", " a", " moment", "."], delay_s=0.05)
    session = "race-" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=running.base_url, timeout=60) as http:

        async def stream(number: int) -> StreamCapture:
            await asyncio.sleep(number * 0.02)
            body = {"session_id": session, "message": f"question {number}", "kb_prefix": "general"}
            return await read_stream(http, "/api/v1/chat/stream", body)

        async def clear(number: int) -> int:
            await asyncio.sleep(0.1 + number * 0.08)
            response = await http.post("/api/v1/clear", json={"session_id": session})
            assert response.status_code == 200, response.text
            return int(response.json()["cleared_messages"])

        captures, _ = await asyncio.gather(
            asyncio.gather(*(stream(n) for n in range(STREAMS))), asyncio.gather(*(clear(n) for n in range(CLEARS)))
        )
        stored = await stored_messages(http, session)

        scripted_llm.default = Reply(tokens=["Fresh", " start", "."])
        after = await read_stream(
            http, "/api/v1/chat/stream", {"session_id": session, "message": "the next turn", "kb_prefix": "general"}
        )

    questions = {m["request_id"] for m in stored if m["role"] == "user"}
    answers = {m["request_id"] for m in stored if m["role"] == "assistant"}
    assert answers <= questions, f"answers whose question was cleared: {len(answers - questions)}"

    cleared = [capture for capture in captures if capture.events[-1]["message_id"] is None]
    for capture in captures:
        assert capture.status_code == 200
        assert capture.statuses[0] == "start" and capture.statuses[-1] == "done"
    for capture in cleared:  # told why, and nothing else went wrong
        assert [error["code"] for error in capture.of("error")] == ["conversation_cleared"], capture.of("error")
    kept = {capture.events[-1]["message_id"] for capture in captures} - {None}
    assert kept == {m["id"] for m in stored if m["role"] == "assistant"}
    assert cleared, "no stream raced a clear: the test did not exercise the race"

    # The next turn's prompt holds exactly the stored history: whole turns, nothing from before the last clear.
    prompt = scripted_llm.chat_exchanges[-1].body["messages"]
    turns = [(m["role"], m["content"]) for m in prompt if m["role"] in ("user", "assistant")]
    assert turns[-1] == ("user", "the next turn")
    history = [(m["role"], m["content"]) for m in stored if m["content"]]
    assert set(turns[:-1]) <= set(history), "the prompt holds turns that are not in the history"
    assert after.events[-1]["message_id"] is not None
