"""Readiness checks of the backing stores."""

from __future__ import annotations

from typing import Protocol


class HealthProbe(Protocol):
    @property
    def name(self) -> str: ...

    async def ping(self) -> None:
        """Return when the dependency answers; raise `StoreUnavailable` (or any error) otherwise."""
        ...
