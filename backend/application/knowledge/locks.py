"""One write lock per KB, shared by everything that writes a KB's graph."""

from __future__ import annotations

import asyncio


class KbLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def __call__(self, kb: str) -> asyncio.Lock:
        return self._locks.setdefault(kb, asyncio.Lock())
