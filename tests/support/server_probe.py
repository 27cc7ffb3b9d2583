"""The live test server with a look inside: its event loop, its services and the tasks running on it.

"No task left running" is checked where the tasks live: a coroutine is run on the server's own loop (from
the test's thread) to list `asyncio.all_tasks()` and read the stream handler's counters. The probe is an
ASGI wrapper that remembers the loop and the lifespan state when the lifespan starts; nothing in the
product knows about it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from backend.application.services import ServiceContainer
from backend.infrastructure.config.settings import Settings
from tests.support.live_server import LiveServer

T = TypeVar("T")
Scope = dict[str, Any]


class AppProbe:
    """An ASGI app around the real one; records the loop and lifespan state it runs with."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self.loop: asyncio.AbstractEventLoop | None = None
        self._state: dict[str, Any] | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            self.loop = asyncio.get_running_loop()
            self._state = scope.get("state")
        await self._app(scope, receive, send)

    @property
    def services(self) -> ServiceContainer:
        assert self._state is not None, "the server has not started"
        services = self._state["services"]
        assert isinstance(services, ServiceContainer)
        return services

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        """Run `coroutine` on the server's loop and return its result (from the test's thread)."""
        assert self.loop is not None, "the server has not started"
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def task_names(self) -> Counter[str]:
        """What runs on the server's loop now (the probe's own task left out), by coroutine name."""

        async def names() -> Counter[str]:
            me = asyncio.current_task()
            return Counter(_describe(task) for task in asyncio.all_tasks() if task is not me)

        return self.call(names())

    def wait_for_tasks(self, baseline: Counter[str], within_s: float = 10.0) -> Counter[str]:
        """Poll until no task beyond `baseline` runs on the server; returns what is left over (empty if none)."""
        deadline = time.monotonic() + within_s
        while True:
            extra = self.task_names() - baseline
            if not extra or time.monotonic() > deadline:
                return extra
            time.sleep(0.02)


def _describe(task: asyncio.Task[Any]) -> str:
    coroutine = task.get_coro()
    return getattr(coroutine, "__qualname__", None) or type(coroutine).__name__


class ProbedServer(LiveServer):
    """`LiveServer` whose app is wrapped in an `AppProbe` (`self.probe`)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.probe = AppProbe(self._server.config.app)
        self._server.config.app = self.probe


@contextmanager
def probed_server(settings: Settings) -> Iterator[ProbedServer]:
    server = ProbedServer(settings)
    server.start()
    try:
        yield server
    finally:
        server.stop()
