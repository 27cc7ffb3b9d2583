"""A `BulkLoad` for a load that suspends nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from backend.application.ports.graph_store import BulkLoad


class NothingSuspended:
    """The `BulkLoad` of a load that suspended nothing."""

    async def documents_written(self) -> None:
        return None


@asynccontextmanager
async def bulk_load_without_suspension() -> AsyncIterator[BulkLoad]:
    """`bulk_load` for a store whose search indexes need no care during a load."""
    yield NothingSuspended()
