"""The KB catalog: the registry file's KBs plus the KBs created through the API.

Created KBs live in the graph store, so they survive restarts and every server process sharing
the store sees them: a lookup that misses re-reads the store before answering "unknown", and the
list is re-read when older than `refresh_s`. Creating one is a create-if-absent in the store, so of
concurrent creations of one prefix, in one process or several, exactly one succeeds and its definition is kept.

When the store is down, the catalog keeps what it knows (the registry file's KBs and the created ones it
last read) and tries again after `refresh_s`, so routing and general chat go on; only a lookup of a KB it
has never seen fails (`StoreUnavailable`), since "unknown" would then be a guess.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from backend.domain.errors import Conflict, InvalidRequest, KnowledgeStoreUnavailable, StoreUnavailable
from backend.domain.knowledge_base import KB_PREFIX_PATTERN, KnowledgeBase, is_valid_kb_prefix
from backend.domain.worker import DEFAULT_KB_ALIAS
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry

logger = logging.getLogger(__name__)

# How long a request waits for the KB list: a store that is down can take far longer to say so (the Neo4j
# driver retries a read for up to 15 s).
REFRESH_TIMEOUT_S = 2.0


class KnowledgeBaseRecords(Protocol):
    """Where run-time KBs are kept (the graph store)."""

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        """Store `kb` unless its prefix is stored, atomically: True if this call stored it."""
        ...

    async def list_knowledge_bases(self) -> list[KnowledgeBase]: ...


class KnowledgeBaseCatalog:
    """Implements the application's `KnowledgeBaseCatalog` port."""

    def __init__(
        self,
        registry: KnowledgeBaseRegistry,
        records: KnowledgeBaseRecords,
        refresh_s: float = 5.0,
        refresh_timeout_s: float = REFRESH_TIMEOUT_S,
    ) -> None:
        self._registry = registry
        self._records = records
        self._refresh_s = refresh_s
        self._refresh_timeout_s = refresh_timeout_s
        self._created: dict[str, KnowledgeBase] = {}
        self._loaded_at = float("-inf")
        self._lock = asyncio.Lock()

    async def _refresh(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._loaded_at < self._refresh_s:
            return
        async with self._lock:
            if not force and time.monotonic() - self._loaded_at < self._refresh_s:
                return
            try:
                async with asyncio.timeout(self._refresh_timeout_s):
                    stored = await self._records.list_knowledge_bases()
            except (StoreUnavailable, TimeoutError) as error:
                reason = error.message if isinstance(error, StoreUnavailable) else "it did not answer in time"
                if force:
                    raise KnowledgeStoreUnavailable(f"the knowledge bases could not be read: {reason}") from error
                self._loaded_at = time.monotonic()  # keep what is known; try again after refresh_s
                logger.warning("knowledge bases not re-read, using the %d known: %s", len(self._created), reason)
                return
            self._created = {kb.kb_prefix: kb for kb in stored if self._registry.get(kb.kb_prefix) is None}
            self._loaded_at = time.monotonic()

    def _lookup(self, kb_prefix: str) -> KnowledgeBase | None:
        from_file = self._registry.get(kb_prefix)
        if from_file is not None or kb_prefix in ("", DEFAULT_KB_ALIAS):
            return from_file
        return self._created.get(kb_prefix)

    async def get(self, kb_prefix: str) -> KnowledgeBase | None:
        await self._refresh()
        found = self._lookup(kb_prefix)
        if found is None and is_valid_kb_prefix(kb_prefix):
            await self._refresh(force=True)  # created by another process since the last refresh?
            found = self._lookup(kb_prefix)
        return found

    async def list(self) -> Sequence[KnowledgeBase]:
        await self._refresh()
        return (*self._registry.list(), *sorted(self._created.values(), key=lambda kb: kb.kb_prefix))

    async def create(self, kb: KnowledgeBase) -> KnowledgeBase:
        if not is_valid_kb_prefix(kb.kb_prefix):
            raise InvalidRequest(f"kb_prefix must match {KB_PREFIX_PATTERN.pattern} and must not be 'general'")
        if kb.handler:
            raise InvalidRequest("KB handlers are code: configure them in the registry file, not through the API")
        taken = self._registry.get(kb.kb_prefix) is not None or kb.kb_prefix == DEFAULT_KB_ALIAS
        # The store decides among created KBs: of concurrent creations of one prefix, from any process, one wins.
        if taken or not await self._records.create_knowledge_base(kb):
            raise Conflict(f"knowledge base {kb.kb_prefix!r} already exists")
        async with self._lock:  # after any refresh that read the store before this KB was in it
            self._created[kb.kb_prefix] = kb
        return kb


class InMemoryKnowledgeBaseRecords:
    """Run-time KBs kept in memory: for tests, and for a catalog that only has a registry file."""

    def __init__(self) -> None:
        self._kbs: dict[str, KnowledgeBase] = {}

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        if kb.kb_prefix in self._kbs:
            return False
        self._kbs[kb.kb_prefix] = kb
        return True

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        return list(self._kbs.values())


def static_catalog(knowledge_bases: Sequence[KnowledgeBase]) -> KnowledgeBaseCatalog:
    """A catalog of fixed KBs (tests, tools)."""
    return KnowledgeBaseCatalog(KnowledgeBaseRegistry(knowledge_bases), InMemoryKnowledgeBaseRecords())
