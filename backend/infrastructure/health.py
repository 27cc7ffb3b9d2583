"""Adapts any store's `ping()` into a named readiness probe."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NamedProbe:
    """Implements `HealthProbe`."""

    name: str
    check: Callable[[], Awaitable[None]]

    async def ping(self) -> None:
        await self.check()
