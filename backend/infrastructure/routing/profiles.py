"""What each KB holds, for the model router's catalog (SPEC §4): a profile per KB, cached.

A profile is the KB's record (description, keywords) and an overview its graph store reads in one bounded
query: the document count, the most mentioned entity names and the longest documents' titles. A KB created
without keywords is then described to the model by what it holds.

The overview is cached per KB for `ttl_s` rather than keyed on a revision of the KB. A KB changes only when
documents are written or deleted, rarely next to messages, and it may change in another process (the CLI,
another server replica), which an in-process signal from the indexer would miss; the Neo4j store keeps no
per-KB revision, and asking for one (or for a count) would be a round trip per KB per routed message, the very
cost the cache is there to avoid. A profile somewhat out of date only shades what the model reads: the offline
router probes the live indexes whatever the profile says. So each process reads a KB's overview at most once
per `ttl_s`; messages that need it meanwhile wait for the one read under way rather than start another. A read
that fails or outlasts `read_timeout_s` leaves the older overview (or none: the record alone) in use and is
tried again after `retry_s`, so a slow store cannot hold every routed message up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from backend.domain.errors import StoreUnavailable
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.domain.routing import KbProfile

logger = logging.getLogger(__name__)

# Read per KB: more than a catalog line can show, so the prompt's character budget decides what is shown.
OVERVIEW_ENTITIES = 24
OVERVIEW_TITLES = 8


class KbOverviews(Protocol):
    """Where overviews come from (`GraphStore.overview`)."""

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview: ...


@dataclass(frozen=True, slots=True)
class _Cached:
    overview: KbOverview
    fresh_until: float


class CachedKbProfiles:
    """Implements `KbProfiles`."""

    def __init__(
        self,
        store: KbOverviews,
        ttl_s: float = 60.0,
        read_timeout_s: float = 1.0,
        retry_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._read_timeout_s = read_timeout_s
        self._retry_s = retry_s
        self._clock = clock
        self._cached: dict[str, _Cached] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def profiles(self, knowledge_bases: Sequence[KnowledgeBase]) -> list[KbProfile]:
        overviews = await asyncio.gather(*(self._overview(kb.kb_prefix) for kb in knowledge_bases))
        return [KbProfile(kb, overview) for kb, overview in zip(knowledge_bases, overviews, strict=True)]

    async def _overview(self, kb: str) -> KbOverview:
        cached = self._cached.get(kb)
        if cached is not None and self._clock() < cached.fresh_until:
            return cached.overview
        async with self._locks.setdefault(kb, asyncio.Lock()):
            cached = self._cached.get(kb)  # read by the message this one waited for?
            if cached is None or self._clock() >= cached.fresh_until:
                cached = await self._read(kb, cached)
                self._cached[kb] = cached
            return cached.overview

    async def _read(self, kb: str, older: _Cached | None) -> _Cached:
        try:
            async with asyncio.timeout(self._read_timeout_s):
                overview = await self._store.overview(kb, OVERVIEW_ENTITIES, OVERVIEW_TITLES)
        except (StoreUnavailable, TimeoutError) as error:
            logger.warning("the profile of %s could not be read: %s", kb, type(error).__name__)
            kept = older.overview if older is not None else KbOverview()
            return _Cached(kept, self._clock() + self._retry_s)
        return _Cached(overview, self._clock() + self._ttl_s)
