"""The KB catalog: registry-file KBs plus run-time KBs shared through a store."""

from __future__ import annotations

import asyncio

import pytest

from backend.domain.errors import Conflict, InvalidRequest
from backend.domain.knowledge_base import KnowledgeBase
from backend.infrastructure.knowledge_bases.catalog import InMemoryKnowledgeBaseRecords, KnowledgeBaseCatalog
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry

FILE_KB = KnowledgeBase("orchard", "apples", ("apple",), is_default=True)


def catalog(records: InMemoryKnowledgeBaseRecords, refresh_s: float = 60.0) -> KnowledgeBaseCatalog:
    return KnowledgeBaseCatalog(KnowledgeBaseRegistry([FILE_KB]), records, refresh_s=refresh_s)


async def test_created_kbs_are_listed_after_the_file_kbs_and_found_by_prefix() -> None:
    kbs = catalog(InMemoryKnowledgeBaseRecords())
    await kbs.create(KnowledgeBase("law", "tenancy law", ("lease",)))
    assert [kb.kb_prefix for kb in await kbs.list()] == ["orchard", "law"]
    found = await kbs.get("law")
    assert found is not None and found.description == "tenancy law"
    assert await kbs.get("") == FILE_KB and await kbs.get("default") == FILE_KB


async def test_a_kb_created_by_another_process_is_found_on_first_lookup() -> None:
    shared = InMemoryKnowledgeBaseRecords()
    first, second = catalog(shared), catalog(shared)
    assert await second.get("law") is None
    await first.create(KnowledgeBase("law"))
    assert await second.get("law") is not None  # a miss re-reads the store, whatever the refresh interval


@pytest.mark.parametrize(
    ("kb", "error"),
    [
        (KnowledgeBase("orchard"), Conflict),
        (KnowledgeBase("default"), Conflict),
        (KnowledgeBase("Bad-Name"), InvalidRequest),
        (KnowledgeBase("general"), InvalidRequest),
        (KnowledgeBase("x" * 33), InvalidRequest),
        (KnowledgeBase("law", handler="os:system"), InvalidRequest),
    ],
)
async def test_invalid_or_taken_prefixes_are_refused_and_nothing_is_stored(
    kb: KnowledgeBase, error: type[Exception]
) -> None:
    records = InMemoryKnowledgeBaseRecords()
    with pytest.raises(error):
        await catalog(records).create(kb)
    assert await records.list_knowledge_bases() == []


async def test_creating_the_same_kb_twice_is_a_conflict() -> None:
    kbs = catalog(InMemoryKnowledgeBaseRecords())
    await kbs.create(KnowledgeBase("law"))
    with pytest.raises(Conflict):
        await kbs.create(KnowledgeBase("law"))


async def test_of_concurrent_creations_of_one_kb_in_two_processes_exactly_one_succeeds() -> None:
    shared = InMemoryKnowledgeBaseRecords()
    first, second = catalog(shared), catalog(shared)
    rivals = [KnowledgeBase("law", f"definition {i}") for i in range(10)]
    outcomes = await asyncio.gather(
        *((first, second)[i % 2].create(kb) for i, kb in enumerate(rivals)), return_exceptions=True
    )
    won = [outcome for outcome in outcomes if isinstance(outcome, KnowledgeBase)]
    assert len(won) == 1
    assert sum(isinstance(outcome, Conflict) for outcome in outcomes) == 9
    assert await shared.list_knowledge_bases() == won
    assert await first.get("law") == won[0] and await second.get("law") == won[0]


class HeldRecords(InMemoryKnowledgeBaseRecords):
    """Records whose list is read at once but handed back only when released, like a slow store."""

    def __init__(self) -> None:
        super().__init__()
        self.read = asyncio.Event()
        self.release = asyncio.Event()
        self.created = asyncio.Event()

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        kbs = await super().list_knowledge_bases()
        self.read.set()
        await self.release.wait()
        return kbs

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        stored = await super().create_knowledge_base(kb)
        self.created.set()
        return stored


async def test_a_kb_created_while_the_list_is_being_read_stays_listed() -> None:
    records = HeldRecords()
    kbs = catalog(records)
    listing = asyncio.create_task(kbs.list())
    await records.read.wait()  # the list read before the KB was stored
    creating = asyncio.create_task(kbs.create(KnowledgeBase("law")))
    await records.created.wait()
    records.release.set()
    await asyncio.gather(listing, creating)
    assert [kb.kb_prefix for kb in await kbs.list()] == ["orchard", "law"]
