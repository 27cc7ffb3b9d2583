"""Clients hanging up at random points of their streams, all at once, over real HTTP.

Each partial answer is stored exactly once, the model call behind each stream is closed, and nothing keeps
running on the server afterwards: its event loop is back to the tasks it had before (checked on the loop
itself through tests/support/server_probe.py) and the stream handler has no stream or save left.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.helpers import messages, new_session, poll, read_stream_with
from tests.support.fault_report import outcome, owed
from tests.support.live_server import llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.server_probe import probed_server
from tests.support.sse import StreamCapture, read_stream

pytestmark = pytest.mark.slow

TOKENS = [f"t{i} " for i in range(30)]
CLIENTS = 10
# Random but reproducible: FAULT_SEED=<n> replays a failing run (the seed is in every assertion message).
SEED = int(os.environ.get("FAULT_SEED", "20261126"))


class HangUp(Exception):
    """Raised from inside the reader to drop the connection at the chosen event."""


async def _hang_up_after(http: httpx.AsyncClient, body: dict[str, Any], events: int) -> StreamCapture:
    seen = StreamCapture()

    async def count(capture: StreamCapture) -> None:
        nonlocal seen
        seen = capture
        if len(capture.events) >= events:
            raise HangUp

    with pytest.raises(HangUp):
        await read_stream_with(http, body, count)
    return seen


async def test_disconnects_at_random_points_store_each_partial_answer_once_and_leave_no_task(
    data_dir: Path, scripted_llm: ScriptedLLM, fault_report: Any
) -> None:
    rng = random.Random(SEED)
    scripted_llm.default = Reply(tokens=TOKENS, delay_s=0.02)
    with probed_server(make_settings(data_dir, **llm_settings(scripted_llm))) as running:
        probe = running.probe
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            # One whole stream first: it starts what a server keeps for good (sse-starlette's shutdown watcher)
            # and shows where the tokens begin.
            whole_session = new_session()
            whole = await read_stream(http, "/api/v1/chat/stream", _body(whole_session, -1))
            assert outcome(whole) == "done" and whole.text == "".join(TOKENS)
            first_token = whole.statuses.index("token")
            baseline = probe.task_names()

            # From right after `start` to the middle of the answer; always one before any token and one at the first.
            points = [1, first_token + 1, *(rng.randrange(1, first_token + 20) for _ in range(CLIENTS - 2))]
            sessions = [new_session("d") for _ in points]
            seen = await asyncio.gather(
                *(
                    _hang_up_after(http, _body(session, i), n)
                    for i, (session, n) in enumerate(zip(sessions, points, strict=True))
                )
            )

            async def all_stored() -> list[list[dict[str, Any]]] | None:
                histories = [await messages(http, session) for session in sessions]
                return histories if all(len(history) >= 2 for history in histories) else None

            await poll(all_stored, 10, f"partial answers not stored (seed {SEED})")
            leftover = await asyncio.to_thread(probe.wait_for_tasks, baseline, 10)
            stream = probe.services.stream
            counters = await asyncio.to_thread(probe.call, _counters(stream))
            # Read again only now: a second save, had there been one, has landed by the time nothing runs.
            histories = [await messages(http, session) for session in sessions]
            whole_history = await messages(http, whole_session)

    assert leftover == {}, f"tasks still running after the disconnects: {leftover} (seed {SEED})"
    assert counters == (0, 0), f"streams, pending saves: {counters} (seed {SEED})"
    chats = scripted_llm.chat_exchanges[1:]  # after the whole stream
    assert all(exchange.outcome == "disconnected" for exchange in chats), [e.outcome for e in chats]
    for index, (capture, history, point) in enumerate(zip(seen, histories, points, strict=True)):
        where = f"client {index} hung up after event {point} (seed {SEED})"
        assert [m["role"] for m in history] == ["user", "assistant"], where
        answer = history[1]
        assert answer["completed"] is False, where
        # What was stored is what the stream had produced: at least what this client saw, a prefix of the answer.
        assert answer["content"].startswith(capture.text), where
        assert "".join(TOKENS).startswith(answer["content"]), where
        assert len(answer["content"].split()) < len(TOKENS), where
        calls = [e for e in chats if str(e.body["messages"][-1]["content"]).endswith(_question(index))]
        assert len(calls) <= 1, where
        if capture.of("token"):  # the model was asked, once, and hung up on
            assert len(calls) == 1, where
    fault_report(
        "Client disconnects at random points",
        f"{CLIENTS} concurrent streams, each dropped by its client after a random event (seed {SEED})",
        requests=1 + CLIENTS,
        messages_expected=owed(whole) + sum(owed(capture) for capture in seen),
        messages_stored=len(whole_history) + sum(len(history) for history in histories),
        outcomes=["done"] + [f"hung up after {'a token' if c.of('token') else 'no token'}" for c in seen],
        notes=f"hung up after events {sorted(points)}; model calls hung up on: {len(chats)}; "
        "tasks left on the server loop: 0",
    )


def _question(index: int) -> str:
    return f"When was Wrenfield Orchard founded, and by whom? (#{index})"


def _body(session: str, index: int) -> dict[str, Any]:
    return {"session_id": session, "message": _question(index), "kb_prefix": "orchard"}


async def _counters(stream: Any) -> tuple[int, int]:
    return stream.active_streams, stream.pending_saves
