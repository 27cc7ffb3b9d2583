"""GraphIndexer's pipeline: the next batch is staged while the one before it is written, and a failed write
stops the run with nothing after it written (the embedded store, its writes slowed or broken on purpose)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from backend.application.ports.graph_store import DocumentWrite
from backend.application.ports.ingestion import SourceDocument
from backend.domain.errors import StoreUnavailable
from backend.domain.knowledge_base import KnowledgeBase
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from tests.support.hash_embedder import HashEmbedder
from tests.support.indexing import make_indexer

KB = KnowledgeBase("pipeline")
DOCUMENTS = [
    SourceDocument(f"Person {n}", f"Person {n} lived in Town {n}. Person {n} knew Person {n + 1}.", source=f"{n}.md")
    for n in range(4)
]


class GatedStore:
    """The embedded store, with `upsert_documents` held until `release` is set (or failing on a given call)."""

    def __init__(self, inner: EmbeddedGraphStore, fail_on_call: int | None = None) -> None:
        self._inner = inner
        self.release = asyncio.Event()
        self.first_write = asyncio.Event()
        self.writes_started = 0
        self.writes_finished = 0
        self._fail_on_call = fail_on_call

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def upsert_documents(self, kb: str, documents: Sequence[DocumentWrite]) -> None:
        self.writes_started += 1
        self.first_write.set()
        if self.writes_started == self._fail_on_call:
            raise StoreUnavailable("the store went away")
        await self.release.wait()
        await self._inner.upsert_documents(kb, documents)
        self.writes_finished += 1


class WatchingEmbedder(HashEmbedder):
    """Notes how many writes had finished each time it was asked for chunk vectors."""

    def __init__(self, store: GatedStore) -> None:
        super().__init__()
        self._store = store
        self.seen_finished: list[int] = []

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if texts and "\n" in texts[0]:  # chunk texts are "title\ntext"; entity names have no newline
            self.seen_finished.append(self._store.writes_finished)
            if len(self.seen_finished) == 2:
                self._store.release.set()  # the second batch is being staged: let the first write go on
        return await super().embed(texts)


@pytest.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[EmbeddedGraphStore]:
    store = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    yield store
    await store.close()


async def test_the_next_batch_is_staged_while_the_one_before_is_written(embedded: EmbeddedGraphStore) -> None:
    store = GatedStore(embedded)
    embedder = WatchingEmbedder(store)
    indexer = make_indexer(store, embedder, batch_size=2)  # type: ignore[arg-type]
    report = await asyncio.wait_for(indexer.index(KB, DOCUMENTS), timeout=30)
    # The second batch's chunks were embedded while the first batch's write was held open.
    assert embedder.seen_finished[:2] == [0, 0]
    assert store.writes_finished == 2 and report.documents_added == 4
    assert (await embedded.counts(KB.kb_prefix)).documents == 4


async def test_a_failed_write_stops_the_run_with_nothing_after_it_written(embedded: EmbeddedGraphStore) -> None:
    store = GatedStore(embedded, fail_on_call=2)
    store.release.set()
    progress: list[int] = []
    indexer = make_indexer(store, HashEmbedder(), batch_size=1)  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable, match="went away"):
        await indexer.index(KB, DOCUMENTS, lambda done, total, title: progress.append(done))
    stored = await embedded.list_documents(KB.kb_prefix)
    assert [d.title for d in stored] == ["Person 0"]  # the first batch only: the third was never written
    assert progress == [1]
    assert store.writes_started == 2


async def test_a_cancelled_run_cancels_the_write_under_way(embedded: EmbeddedGraphStore) -> None:
    store = GatedStore(embedded)  # never released: the first write waits forever
    indexer = make_indexer(store, HashEmbedder(), batch_size=1)  # type: ignore[arg-type]
    run = asyncio.create_task(indexer.index(KB, DOCUMENTS))
    await asyncio.wait_for(store.first_write.wait(), timeout=30)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert store.writes_finished == 0 and await embedded.list_documents(KB.kb_prefix) == []
    assert not [t for t in asyncio.all_tasks() if "_write_batch" in repr(t.get_coro())]
