"""The KB catalog: registry-file KBs plus run-time KBs shared through a store."""

from __future__ import annotations

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
