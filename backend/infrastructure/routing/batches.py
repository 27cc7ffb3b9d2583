"""Run-sharing for calls with a large fixed cost: what arrives while one run is in flight goes in the next.

A LangGraph run costs about a millisecond of CPU before a node does any work (the Pregel loop, its tasks,
channels and callbacks). Under load that fixed cost, paid per message, was the largest part of the time to
first token. `SharedRuns` pays it per run instead: the first caller starts a run at once (a single message
waits no longer than one event-loop turn); callers arriving while it runs are taken together by the next.
The same thing as a database's group commit.

A run gets a fresh `contextvars` context, so no request's context (its budget, its log fields) leaks into
the others'. A caller that is cancelled while waiting simply drops out; its result is discarded.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

DEFAULT_MAX_RUN = 64  # bounds one run's latency when hundreds arrive at once


class SharedRuns(Generic[Item, Result]):
    """`await submit(item)` → `run([... item ...])[i]`, sharing runs between concurrent callers.

    `run` gets a non-empty list and must return one result per item, in order; if it raises, every caller
    of that run gets the exception.
    """

    def __init__(
        self, run: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]], max_run: int = DEFAULT_MAX_RUN
    ) -> None:
        if max_run < 1:
            raise ValueError("max_run must be at least 1")
        self._run = run
        self._max_run = max_run
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.runs = 0  # how many runs were made (tests and benchmarks read it)

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        if self._worker is not None and self._worker.get_loop() is not loop:
            # The loop that ran it is gone (each test has its own loop); its waiters went with it.
            self._worker, self._waiting = None, []
        future: asyncio.Future[Result] = loop.create_future()
        self._waiting.append((item, future))
        if self._worker is None:
            self._worker = asyncio.create_task(self._drain(), context=contextvars.Context())
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                taken = self._waiting[: self._max_run]
                del self._waiting[: self._max_run]
                live = [(item, future) for item, future in taken if not future.done()]
                if live:
                    await self._run_once(live)
        finally:
            self._worker = None
            for _, future in self._waiting:  # only when this task was cancelled (the loop is closing)
                future.cancel()
            self._waiting.clear()

    async def _run_once(self, live: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        self.runs += 1
        try:
            results = await self._run([item for item, _ in live])
            if len(results) != len(live):
                raise RuntimeError(f"a shared run returned {len(results)} results for {len(live)} items")
        except asyncio.CancelledError:
            for _, future in live:
                future.cancel()
            raise
        except Exception as error:  # every caller of this run gets it; the next run is unaffected
            for _, future in live:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(live, results, strict=True):
            if not future.done():
                future.set_result(result)
