"""The KB catalog while its store (the graph store) is down: it keeps what it knows, promptly."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from backend.domain.errors import StoreUnavailable
from backend.domain.knowledge_base import KnowledgeBase
from backend.infrastructure.knowledge_bases.catalog import KnowledgeBaseCatalog
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry

FILE_KB = KnowledgeBase("orchard", "apples", ("apple",), is_default=True)
CREATED = KnowledgeBase("law", "tenancy law", ("lease",))


class FlakyRecords:
    """KB records whose store can be taken down: failing at once, or hanging like a driver that retries."""

    def __init__(self) -> None:
        self.kbs = [CREATED]
        self.down: str | None = None  # None, "refused" or "hanging"
        self.reads = 0

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        if any(stored.kb_prefix == kb.kb_prefix for stored in self.kbs):
            return False
        self.kbs.append(kb)
        return True

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        self.reads += 1
        if self.down == "refused":
            raise StoreUnavailable("Neo4j at bolt://127.0.0.1:1: list_knowledge_bases failed: refused")
        if self.down == "hanging":
            await asyncio.sleep(60)
        return list(self.kbs)


def _catalog(records: FlakyRecords) -> KnowledgeBaseCatalog:
    return KnowledgeBaseCatalog(KnowledgeBaseRegistry([FILE_KB]), records, refresh_s=0.0, refresh_timeout_s=0.2)


@pytest.mark.parametrize("failure", ["refused", "hanging"])
async def test_a_store_going_down_keeps_the_known_kbs_and_answers_promptly(
    failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    records = FlakyRecords()
    catalog = _catalog(records)
    assert [kb.kb_prefix for kb in await catalog.list()] == ["orchard", "law"]

    records.down = failure
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        listed = [kb.kb_prefix for kb in await catalog.list()]
        found = await catalog.get("law")
    assert listed == ["orchard", "law"]
    assert found == CREATED
    assert await catalog.get("orchard") == FILE_KB
    assert time.monotonic() - started < 1.5  # bounded by the refresh timeout, not by the store
    assert any("not re-read" in record.getMessage() for record in caplog.records)

    records.down = None
    records.kbs.append(KnowledgeBase("tax", "tax law"))
    assert [kb.kb_prefix for kb in await catalog.list()] == ["orchard", "law", "tax"]  # back: read again


async def test_a_kb_never_seen_is_store_unavailable_not_unknown_while_the_store_is_down() -> None:
    records = FlakyRecords()
    catalog = _catalog(records)
    records.down = "refused"
    with pytest.raises(StoreUnavailable, match="knowledge bases could not be read"):
        await catalog.get("tax")
    assert [kb.kb_prefix for kb in await catalog.list()] == ["orchard"]  # the registry file's KBs still route


async def test_failed_reads_are_retried_only_after_the_refresh_interval() -> None:
    records = FlakyRecords()
    catalog = KnowledgeBaseCatalog(KnowledgeBaseRegistry([FILE_KB]), records, refresh_s=60.0)
    records.down = "refused"
    for _ in range(5):
        await catalog.list()
    assert records.reads == 1
